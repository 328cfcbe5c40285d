"""Knobs injected into code we did not write: each injector changes what the script builds,
a knob that cannot act says why, and uninstalling restores every original."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.optim.optimizer as optim_mod
import torch.utils.data.dataloader as dl_mod
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler, TensorDataset

from torchdoctor.collect.inject import Injection, InjectionRecord
from torchdoctor.collect.inject.optimizer import impl_classes
from torchdoctor.collect.inject.trained_model import UNREACHED
from torchdoctor.core.errors import KnobError


def _patched_attrs() -> tuple[Any, ...]:
    owners: list[tuple[Any, tuple[str, ...]]] = [
        (dl_mod.DataLoader, ("__init__",)),
        (optim_mod.Optimizer, ("__init__", "zero_grad")),
        (nn.Module, ("__call__", "zero_grad", "__getstate__")),
        (torch.Tensor, ("backward",)),
        (torch, ("set_num_threads",)),
        *((cls, ("__init__",)) for cls in impl_classes()),
    ]
    return tuple(vars(owner).get(name) for owner, names in owners for name in names)


def _dataset(n: int = 32, shape: tuple[int, ...] = (4,)) -> TensorDataset:
    return TensorDataset(torch.randn(n, *shape), torch.randint(0, 2, (n,)))


def _status(record: InjectionRecord, knob: str) -> tuple[str, str | None]:
    outcome = record.outcome(knob)
    assert outcome is not None
    return outcome.status, outcome.reason


# ---- DataLoader ------------------------------------------------------------------------------


def test_dataloader_imported_by_name_is_built_with_the_recipe() -> None:
    recipe = {"num_workers": 2, "batch_size": 8, "prefetch_factor": 4, "persistent_workers": True}
    with Injection(recipe) as inj:
        loader = DataLoader(_dataset(), batch_size=4, shuffle=True)  # the script's own call
    assert (loader.num_workers, loader.batch_size) == (2, 8)
    assert (loader.prefetch_factor, loader.persistent_workers) == (4, True)
    record = inj.record()
    assert record.applied == ["batch_size", "num_workers", "persistent_workers", "prefetch_factor"]
    assert "num_workers 0 -> 2" in record.outcome("num_workers").applied_at[0]  # type: ignore[union-attr]
    assert "test_inject.py" in record.outcome("num_workers").applied_at[0]  # type: ignore[union-attr]
    # uninstalled: the same call builds the script's own loader again
    assert DataLoader(_dataset(), batch_size=4).num_workers == 0


def test_prefetch_and_persistent_need_workers_per_loader() -> None:
    with Injection({"prefetch_factor": 4, "persistent_workers": True}) as inj:
        plain = DataLoader(_dataset(), batch_size=4)
    assert plain.prefetch_factor is None and plain.persistent_workers is False
    status, reason = _status(inj.record(), "prefetch_factor")
    assert status == "not_applied"
    assert reason is not None and "without worker processes" in reason
    # the script's own workers are enough: the catalogue's recipe-level check is not used
    with Injection({"prefetch_factor": 4}) as inj:
        loader = DataLoader(_dataset(), batch_size=4, num_workers=1)
    assert loader.prefetch_factor == 4
    assert _status(inj.record(), "prefetch_factor") == ("applied", None)


def test_batch_size_with_a_batch_sampler_is_not_applied() -> None:
    data = _dataset()
    sampler = BatchSampler(SequentialSampler(data), batch_size=4, drop_last=False)
    with Injection({"batch_size": 16}) as inj:
        loader = DataLoader(data, batch_sampler=sampler)
    assert len(next(iter(loader))[0]) == 4
    status, reason = _status(inj.record(), "batch_size")
    assert status == "not_applied" and reason is not None and "batch_sampler" in reason


# ---- optimizer -------------------------------------------------------------------------------


def test_optimizer_impl_set_where_the_class_supports_it() -> None:
    model = nn.Linear(4, 2)
    with Injection({"optimizer_impl": "fused"}) as inj:
        sgd = torch.optim.SGD(model.parameters(), lr=0.1)
        adamw = torch.optim.AdamW(model.parameters(), lr=0.1, foreach=True)
        adafactor = torch.optim.Adafactor(model.parameters())
    assert sgd.defaults["fused"] is True
    assert adamw.defaults["fused"] is True and adamw.defaults["foreach"] is False
    assert adafactor.defaults["foreach"] is None  # no fused Adafactor: its own setting stays
    outcome = inj.record().outcome("optimizer_impl")
    assert outcome is not None and outcome.status == "applied" and outcome.applied_count == 2
    assert outcome.reason is not None and "Adafactor has no fused" in outcome.reason
    assert torch.optim.SGD(model.parameters(), lr=0.1).defaults["fused"] is None


def test_sgd_built_by_the_script_gets_foreach() -> None:
    model = nn.Linear(4, 2)
    with Injection({"optimizer_impl": "foreach"}):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
    assert opt.defaults["foreach"] is True


def test_zero_grad_set_to_none_enforced() -> None:
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(3, 4)).sum().backward()
    with Injection({"set_to_none": True}) as inj:
        opt.zero_grad(set_to_none=False)
    assert model.weight.grad is None
    assert _status(inj.record(), "set_to_none") == ("applied", None)


# ---- threads ---------------------------------------------------------------------------------


def test_threads_set_at_start_and_kept() -> None:
    before = torch.get_num_threads()
    wanted = 1 if before != 1 else 2
    with Injection({"threads": wanted}) as inj:
        assert torch.get_num_threads() == wanted
        torch.set_num_threads(before)  # the script's own call would undo the recipe
        assert torch.get_num_threads() == wanted
    assert torch.get_num_threads() == before
    outcome = inj.record().outcome("threads")
    assert outcome is not None and outcome.applied_count == 2
    assert f"set_num_threads({before}) kept at {wanted}" in outcome.applied_at[1]


# ---- the trained model -----------------------------------------------------------------------


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.head = nn.Linear(4 * 6 * 6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        self.conv_out_channels_last = y.is_contiguous(memory_format=torch.channels_last)
        return self.head(y.flatten(1))


def test_autocast_bf16_around_the_optimizers_model() -> None:
    model, other = nn.Linear(4, 2), nn.Linear(4, 2)
    with Injection({"precision": "bf16"}) as inj:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        assert other(torch.randn(3, 4)).dtype == torch.float32  # owns no optimizer parameter
        out = model(torch.randn(3, 4))
        assert out.dtype == torch.bfloat16
        out.float().sum().backward()
        opt.step()
        assert model(torch.randn(3, 4)).dtype == torch.bfloat16
    record = inj.record()
    assert record.model == "Linear" and record.device_type == "cpu"
    assert _status(record, "precision") == ("applied", None)
    assert model(torch.randn(3, 4)).dtype == torch.float32  # uninstalled
    assert "forward" not in vars(model)


def test_channels_last_converts_the_model_and_its_4d_inputs() -> None:
    model = _Net()
    with Injection({"channels_last": True}) as inj:
        torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(2, 3, 8, 8)).sum().backward()
    assert model.conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert model.conv_out_channels_last
    assert _status(inj.record(), "channels_last") == ("applied", None)


def test_channels_last_without_4d_input_is_reported() -> None:
    model = nn.Linear(4, 2)
    with Injection({"channels_last": True}) as inj:
        torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(3, 4))
    status, reason = _status(inj.record(), "channels_last")
    assert status == "not_applied" and reason is not None and "no 4-D" in reason


class _NarrowShortcut(nn.Module):
    """A ResNet shortcut of 4 channels: a stride-2 1x1 convolution oneDNN mistrains in
    channels_last on a CPU (`knobs.memory_format.MIN_STRIDED_1X1_IN_CHANNELS`)."""

    def __init__(self) -> None:
        super().__init__()
        self.shortcut = nn.Conv2d(4, 8, 1, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shortcut(x)


def test_channels_last_is_refused_where_onednn_would_mistrain_the_model() -> None:
    model = _NarrowShortcut()
    with Injection({"channels_last": True}) as inj:
        torch.optim.SGD(model.parameters(), lr=0.1)
        out = model(torch.randn(2, 4, 8, 8))  # forward only: the backward is what hangs
    # A 1x1 kernel is contiguous in both formats: its strides tell them apart.
    assert model.shortcut.weight.stride() == (4, 1, 1, 1)  # (4, 1, 4, 4) in channels_last
    assert out.is_contiguous()  # its input was not converted either
    status, reason = _status(inj.record(), "channels_last")
    assert status == "not_applied" and reason is not None
    assert "'shortcut' has 4 input channels" in reason and "oneDNN issue #6035" in reason


def test_compile_routes_the_forward_through_dynamo() -> None:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with Injection({"compile": "default"}, compile_backend="eager") as inj:
        torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(3, 4)).sum().backward()
    assert counters["stats"]["unique_graphs"] >= 1
    assert counters["frames"]["ok"] >= 1
    assert _status(inj.record(), "compile") == ("applied", None)
    torch._dynamo.reset()


def test_checkpointing_recomputes_repeated_blocks_in_backward() -> None:
    blocks = nn.ModuleList(nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(3))
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(*blocks))
    calls = [0]
    # a module inside a block: checkpointing runs the block's forward again in backward
    blocks[1][0].register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    with Injection({"checkpointing": True}) as inj:
        torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(2, 4, requires_grad=True)).sum().backward()
    assert calls[0] == 2  # forward, then again in backward: its activations were not kept
    assert _status(inj.record(), "checkpointing") == ("applied", None)


def test_fp16_scales_backward_and_steps_through_the_grad_scaler() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    reference = nn.Linear(4, 2)
    reference.load_state_dict(model.state_dict())
    x = torch.randn(3, 4)
    scalers: list[Any] = []

    def scaler(device_type: str) -> Any:
        scalers.append(torch.amp.GradScaler(device_type, init_scale=1024.0))
        return scalers[-1]

    with torch.autocast("cpu", dtype=torch.float16):
        reference(x).float().sum().backward()
    with Injection({"precision": "fp16"}, grad_scaler=scaler) as inj:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = model(x).float().sum()
        assert model(x).dtype == torch.float16
        loss.backward()
        # the loss was scaled: the gradients are 1024 times the loss's own
        assert torch.allclose(model.bias.grad, 1024.0 * reference.bias.grad)
        before = model.weight.detach().clone()
        model.bias.grad[0] = float("inf")  # an overflowed step is skipped and the scale backs off
        opt.step()
        assert torch.equal(model.weight.detach(), before)
        assert scalers[0].get_scale() == 512.0
        opt.zero_grad()
        model(x).float().sum().backward()
        opt.step()  # a finite step unscales before it updates
        assert not torch.equal(model.weight.detach(), before)
    assert len(scalers) == 1
    status, _ = _status(inj.record(), "precision")
    assert status == "applied"
    assert "step" not in vars(opt)  # uninstalled


def test_model_knobs_without_training_are_reported_once() -> None:
    model = nn.Linear(4, 2)
    with Injection({"precision": "bf16", "pin_memory": True, "grad_accum": 4}) as inj:
        with torch.no_grad():
            model(torch.randn(3, 4))
        model(torch.randn(3, 4))  # no optimizer: this call is taken as training
    record = inj.record()
    assert _status(record, "precision") == ("applied", None)
    status, reason = _status(record, "pin_memory")
    assert status == "not_applied" and reason is not None and "CUDA" in reason
    assert _status(record, "grad_accum")[0] == "not_applied"
    with Injection({"compile": "default"}) as inj:
        pass
    assert _status(inj.record(), "compile") == ("not_applied", UNREACHED)


def test_values_that_ask_for_nothing_are_unchanged() -> None:
    with Injection({"precision": "fp32", "compile": "off", "num_workers": None}) as inj:
        assert inj.injectors == ()
    assert {k.knob: k.status for k in inj.record().knobs} == {
        "num_workers": "unchanged",
        "precision": "unchanged",
        "compile": "unchanged",
    }


def test_unknown_knob_is_refused() -> None:
    with pytest.raises(KnobError, match="unknown knob 'workers'"):
        Injection({"workers": 2})


def test_uninstall_restores_every_original() -> None:
    before = _patched_attrs()
    recipe = {
        "num_workers": 1, "batch_size": 4, "optimizer_impl": "foreach", "set_to_none": True,
        "threads": 1, "precision": "fp16", "channels_last": True, "checkpointing": True,
    }  # fmt: skip
    inj = Injection(recipe).install()
    assert _patched_attrs() != before
    model = _Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(2, 3, 8, 8)).float().sum().backward()
    opt.step()
    inj.uninstall()
    assert _patched_attrs() == before
    assert "forward" not in vars(model) and "step" not in vars(opt)


def test_record_round_trips(tmp_path: Any) -> None:
    with Injection({"num_workers": 1}) as inj:
        DataLoader(_dataset(), batch_size=4)
    path = inj.write(tmp_path)
    assert path.name == "injection.json"
    assert InjectionRecord.read(path) == inj.record()


def test_a_compiled_forward_under_the_probes_compiles_once() -> None:
    # The forward probe starts with global module hooks and later moves them onto the
    # outermost modules; inside a compiled forward each change of that state recompiled it
    # (twice per script, mid-measurement). The compile knob pins the probe's hooks to the
    # trained model before compiling, so its forward compiles once.
    from torch._dynamo.utils import counters

    from torchdoctor.collect.hooks import CollectConfig, Instrumentation
    from torchdoctor.collect.probes.forward import FORWARD_SETTLE_STEPS

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    # Many small modules: the global hooks' cost on inner calls is worth the switch.
    model = nn.Sequential(*(nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(24)))
    inst = Instrumentation(CollectConfig(warmup=0, profile_steps=0, cuda_events=False))
    injection = Injection({"compile": "default"}, compile_backend="eager")
    assert injection.model is not None
    injection.model.on_compile = inst.forward.pin
    with inst, injection:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(FORWARD_SETTLE_STEPS + 3):
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
    forward_s = [step.phases.get("forward", 0.0) for step in inst.recorder.steps]
    torch._dynamo.reset()
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    assert all(s > 0 for s in forward_s[1:])  # the pinned hooks still time the forward
