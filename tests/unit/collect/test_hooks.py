"""Instrumentation installed in this process around small training loops."""

from __future__ import annotations

import gc
import gzip
import json
import time
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from torchdoctor.collect import CollectConfig, Instrumentation, ScriptProfile, watch
from torchdoctor.collect.hooks import StopCollection
from torchdoctor.core.errors import CollectError
from torchdoctor.core.steps import PHASES

SLEEP_S = 0.01  # per sample; a loader of batch 2 sleeps at least 20 ms per batch


class SleepyDataset(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(SLEEP_S)
        return torch.randn(4), torch.randn(1)


def train(steps: int, *, items_per_step: int = 0, set_to_none: bool = True) -> None:
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        for _ in range(items_per_step):
            loss.item()
        opt.zero_grad(set_to_none=set_to_none)
        loss.backward()
        opt.step()


def test_optimizer_hook_counts_steps_and_phases_sum() -> None:
    with Instrumentation(CollectConfig(profile_steps=0)) as inst:
        train(6)
    profile = inst.result(argv=["x"])
    assert profile.step_count == 6
    assert profile.step_detection == "optimizer_hook"
    assert profile.optimizer_steps == 6
    for step in profile.steps:
        assert sum(step.phases[p] for p in PHASES) == pytest.approx(step.total_s)
        assert step.phases["forward"] > 0 and step.phases["backward"] > 0


def test_manual_sgd_falls_back_to_backward_calls() -> None:
    gc.collect()  # an optimizer left for the collector by another test would count as built
    with Instrumentation(CollectConfig(profile_steps=0)) as inst:
        w = torch.randn(4, 1, requires_grad=True)
        for _ in range(7):
            loss = (torch.randn(8, 4) @ w).pow(2).mean()
            loss.backward()
            with torch.no_grad():
                w -= 0.1 * w.grad
                w.grad = None
    profile = inst.result()
    assert profile.step_detection == "backward"
    assert profile.step_count == 7
    assert profile.backward_calls == 7


def test_data_wait_measured_against_sleeping_loader() -> None:
    with Instrumentation(CollectConfig(profile_steps=0)) as inst:
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in DataLoader(SleepyDataset(), batch_size=2):
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    profile = inst.result()
    assert profile.step_count == 4
    for step in profile.steps:
        assert step.phases["data_wait"] >= 2 * SLEEP_S  # time.sleep sleeps at least that long
        assert step.samples == 2
    (loader,) = profile.dataloaders
    assert (loader.num_workers, loader.batch_size, loader.pin_memory) == (0, 2, False)
    assert loader.batches_fetched == 4
    assert loader.wait_s >= 8 * SLEEP_S


def test_no_dataloader_means_no_data_wait() -> None:
    with Instrumentation(CollectConfig(profile_steps=0)) as inst:
        train(3)
    profile = inst.result()
    assert profile.dataloaders == []
    assert all(s.phases["data_wait"] == 0.0 for s in profile.steps)


def test_sync_counter_counts_item_calls_per_step() -> None:
    with Instrumentation(CollectConfig(profile_steps=0)) as inst:
        train(4, items_per_step=3)
    profile = inst.result()
    assert profile.sync_counts == [{"item": 3}] * 4
    (site,) = profile.sync_sites
    assert site.startswith(__file__)
    assert profile.sync_sites[site] == 12


def test_printing_a_tensor_counts_once_as_print() -> None:
    with Instrumentation(CollectConfig(profile_steps=0)) as inst:
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            text = f"{loss:.3f} {loss!r}"
            loss.backward()
            opt.step()
    assert text
    assert inst.result().sync_counts == [{"print": 2}] * 2


def test_zero_grad_keep_and_eval_without_no_grad_are_recorded() -> None:
    with Instrumentation(CollectConfig(profile_steps=0)) as inst:
        train(3, set_to_none=False)
        model = nn.Linear(4, 1).eval()
        model(torch.randn(2, 4))  # evaluation without no_grad
        with torch.no_grad():
            model(torch.randn(2, 4))
    profile = inst.result()
    assert profile.zero_grad.calls == 3
    assert profile.zero_grad.set_to_none_false_calls == 3
    assert profile.forward.calls == 3 + 2
    assert profile.forward.grad_enabled_calls == 3 + 1
    assert profile.forward.eval_mode_grad_calls == 1
    assert profile.forward.grad_forwards_without_backward == 1


def test_max_steps_stops_at_a_step_boundary() -> None:
    inst = Instrumentation(CollectConfig(profile_steps=0, max_steps=2))
    inst.install()
    with pytest.raises(StopCollection):
        train(10)
    assert inst.result().step_count == 2


def test_profiled_window_writes_gzipped_trace(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json.gz"
    with Instrumentation(CollectConfig(warmup=1, profile_steps=2, trace_path=trace)) as inst:
        train(5)
    profile = inst.result()
    assert profile.trace_path == str(trace)
    assert profile.trace_steps == [1, 2]
    names = {e.get("name") for e in json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]}
    assert {"ProfilerStep#1", "ProfilerStep#2"} <= names
    assert "ProfilerStep#3" not in names


def test_uninstall_restores_torch() -> None:
    originals = (torch.Tensor.item, torch.Tensor.to, torch.Tensor.backward, torch.autograd.backward)
    with Instrumentation(CollectConfig(profile_steps=0)):
        assert torch.Tensor.item is not originals[0]
    after = (torch.Tensor.item, torch.Tensor.to, torch.Tensor.backward, torch.autograd.backward)
    assert after == originals
    assert "item" not in vars(torch.Tensor)  # the C method is inherited again, not shadowed


def test_record_round_trips_through_json(tmp_path: Path) -> None:
    with Instrumentation(CollectConfig(profile_steps=0)) as inst:
        train(2, items_per_step=1)
    profile = inst.result(argv=["train.py", "--lr", "1"], exit_code=0)
    path = profile.write(tmp_path / "p.json")
    assert ScriptProfile.read(path) == profile
    assert json.loads(path.read_text())["schema"] == "torchdoctor/script_profile"


def test_watch_context_manager() -> None:
    with watch() as w:
        with pytest.raises(CollectError):
            w.result()
        train(3)
    profile = w.result()
    assert profile.step_count == 3
    assert profile.ended_by == "completed"
    assert profile.threads is not None and profile.threads.torch_num_threads >= 1


def test_grad_scaler_found_inf_read_is_not_the_scripts_sync() -> None:
    # GradScaler.step reads found_inf with .item() (torch.amp.grad_scaler._maybe_opt_step)
    # before optimizer.step: the AMP recipe's own sync. The script's one loss.item() counts.
    scaler = torch.amp.GradScaler("cpu")
    with Instrumentation(CollectConfig(profile_steps=0)) as inst:
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.item()
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    profile = inst.result()
    assert profile.sync_counts == [{"item": 1}] * 3


@pytest.mark.parametrize(("allocations", "device"), [(0, "cpu"), (12, "cuda")])
def test_a_cpu_script_on_a_gpu_machine_is_a_cpu_job(
    monkeypatch: pytest.MonkeyPatch, allocations: int, device: str
) -> None:
    # A GPU machine where CUDA got initialized (the step clock's events do that) while the
    # script's tensors stayed on the CPU: the caching allocator never allocated.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(
        torch.cuda,
        "memory_stats",
        lambda index=None: {"allocation.all.allocated": allocations if index == 1 else 0},
    )
    with Instrumentation(CollectConfig(profile_steps=0, cuda_events=False)) as inst:
        train(2)
    assert inst.result().device == device
