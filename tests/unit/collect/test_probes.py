"""Each hook family is a probe that installs, counts and uninstalls on its own: the
coordinator (`Instrumentation`) only composes them."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.optim.optimizer as optim_mod
import torch.utils.data.dataloader as dl_mod
from torch.nn.modules import module as module_mod

from torchdoctor.collect import CollectConfig, Instrumentation
from torchdoctor.collect.probes import ProbeSite
from torchdoctor.collect.probes.optimizer import OptimizerProbe
from torchdoctor.collect.probes.syncs import SyncCounts, SyncProbe
from torchdoctor.collect.step_recorder import HostClock, StepRecorder

# Every attribute a probe may patch, and torch's global module hook tables.
PATCHED = (
    (torch.Tensor, ("backward", "to", "cuda", "item", "cpu", "tolist", "numpy", "__repr__",
                    "__format__", "__float__", "__int__", "__bool__", "__index__")),
    (torch.autograd, ("backward",)),
    (torch.cuda, ("synchronize",)),
    (optim_mod.Optimizer, ("__init__", "zero_grad")),
    (torch.nn.Module, ("zero_grad",)),
    (dl_mod.DataLoader, ("__iter__",)),
    (dl_mod._BaseDataLoaderIter, ("__next__",)),
    (torch.amp.autocast_mode.autocast, ("__enter__",)),
)  # fmt: skip


def _snapshot() -> tuple[Any, ...]:
    attrs = tuple(vars(owner).get(name) for owner, names in PATCHED for name in names)
    hooks = (
        len(module_mod._global_forward_pre_hooks),
        len(module_mod._global_forward_hooks),
        len(optim_mod._global_optimizer_pre_hooks),
        len(optim_mod._global_optimizer_post_hooks),
    )
    return attrs + hooks


@pytest.mark.parametrize("index", range(8))
def test_each_probe_hooks_alone_and_its_site_undoes_it(index: int) -> None:
    probe = Instrumentation(CollectConfig(profile_steps=0)).probes[index]
    before = _snapshot()
    site = ProbeSite()
    probe.install(site)
    try:
        assert _snapshot() != before, type(probe).__name__  # it hooked something
    finally:
        site.remove()
    assert _snapshot() == before


def test_sync_probe_counts_the_scripts_syncs_per_step_with_the_optimizer_probe_alone() -> None:
    syncs: list[SyncProbe] = []
    recorder = StepRecorder(HostClock(), on_step_end=lambda closed: syncs[0].on_step_end())
    sync, optimizer = SyncProbe(recorder), OptimizerProbe(recorder)
    syncs.append(sync)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    site = ProbeSite()
    for probe in (optimizer, sync):
        probe.install(site)
    try:
        for _ in range(3):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            loss.item()
            opt.step()
            opt.zero_grad()
        recorder.finish()
    finally:
        site.remove()
    assert isinstance(sync.counts, SyncCounts)
    # Steps open at the first optimizer step: the first loop's .item() precedes any step.
    assert sync.counts.per_step == [{}, {"item": 1}, {"item": 1}] and len(recorder.steps) == 3
    assert optimizer.counts.steps == 3 and set(optimizer.counts.impls.values()) == {"for_loop"}


def test_scalar_conversions_are_counted_as_the_item_reads_they_are() -> None:
    syncs: list[SyncProbe] = []
    recorder = StepRecorder(HostClock(), on_step_end=lambda closed: syncs[0].on_step_end())
    sync, optimizer = SyncProbe(recorder), OptimizerProbe(recorder)
    syncs.append(sync)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    best = float("inf")
    site = ProbeSite()
    for probe in (optimizer, sync):
        probe.install(site)
    try:
        for _ in range(3):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            seen = loss.detach()
            value = float(seen)  # each of these waits for the device as .item() does
            if bool(seen < best):
                best = value
            int(seen * 0)
            opt.step()
            opt.zero_grad()
        recorder.finish()
    finally:
        site.remove()
    assert sync.counts.per_step == [{}, {"item": 3}, {"item": 3}]
