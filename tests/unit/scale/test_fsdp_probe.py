"""FSDP2's CPU work at N >= 2 timed in the ranks (`_fsdp_probe`): the optimizer's per-tensor +
per-element share from two sizes, each collective's work counted as often as the step runs it,
the job's optimizer rebuilt from its hyperparameters, and the projection adding both, each on
numbers worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_fsdp_projection import _project

from torchdoctor.core.shard_memory import ModelShape, ShardedParameter, ShardUnit
from torchdoctor.scale._fsdp_probe import (
    FsdpProbe,
    OptimizerProbe,
    _hyperparameters,
    gather_copies,
    probe_optimizer,
    read_fsdp_probe,
    reduce_copies,
    unit_work,
)


def _shape() -> ModelShape:
    # a block of 3 rows (padded to 4 at N = 2: 2 rows a rank) and a root of 4 rows
    block = ShardUnit(
        name="b0",
        parameters=[
            ShardedParameter(name="w", rows=3, numel=30),
            ShardedParameter(name="b", rows=3, numel=3),
        ],
    )
    root = ShardUnit(name="", parameters=[ShardedParameter(name="emb", rows=4, numel=16)])
    return ModelShape(
        units=[block, root],
        parameter_bytes=4,
        buffers_bytes=0,
        optimizer="AdamW",
        states_per_element=2,
        state_bytes=4,
        scalar_states_per_parameter=1,
    )


def _optimizer(full_s: float = 0.010, shard_s: float = 0.006) -> OptimizerProbe:
    return OptimizerProbe(
        optimizer="AdamW",
        tensors=3,
        world_size=2,
        full_elements=1000,
        shard_elements=500,
        full_s=full_s,
        shard_s=shard_s,
    )


def test_the_optimizer_share_is_per_tensor_plus_per_element() -> None:
    o = _optimizer()
    # 4 ms over 500 elements: 8 us an element; 10 - 8 = 2 ms per step whatever the size
    assert o.share(1000) == pytest.approx(1.0)
    assert o.share(500) == pytest.approx(0.6)
    assert o.share(250) == pytest.approx((0.002 + 0.002) / 0.010)
    # a shard no faster than the whole (noise): all of it per tensor, never below it
    assert _optimizer(shard_s=0.011).share(250) == pytest.approx(1.0)


def test_each_unit_s_work_is_timed_once_and_never_below_zero() -> None:
    gathered: list[str] = []

    def gather(unit: ShardUnit) -> float:
        gathered.append(unit.name)
        return 1.0 if unit.name else -1.0  # the root cheaper than a bare all-gather: noise

    gathers, reduces = unit_work(
        _shape(),
        2,
        param_dtype_bytes=2,
        reduce_dtype_bytes=2,
        gather_cost=gather,
        reduce_cost=lambda unit: 10.0,
    )
    assert gathered == ["b0", ""]
    assert gathers == {"b0": 1.0, "": 0.0}
    assert reduces == {"b0": 10.0, "": 10.0}


def test_the_copies_run_at_the_units_sizes() -> None:
    shape = _shape()
    block = shape.units[0]
    gather_copies(block, 2, torch.float32, torch.bfloat16)()
    reduce_copies(block, 2, torch.float32, torch.bfloat16)()
    gathers, reduces = unit_work(shape, 2, param_dtype_bytes=2, reduce_dtype_bytes=2)
    assert set(gathers) == set(reduces) == {"b0", ""}
    assert all(t > 0 for t in [*gathers.values(), *reduces.values()])


def test_the_job_s_optimizer_is_rebuilt_at_both_sizes() -> None:
    shape = _shape()
    job = torch.optim.AdamW([torch.zeros(1, requires_grad=True)], lr=0.5, weight_decay=0.25)
    # AdamW records a default its constructor does not take
    assert set(_hyperparameters(job)) <= set(job.defaults) - {"decoupled_weight_decay"}
    assert _hyperparameters(job)["lr"] == 0.5
    o = probe_optimizer(job, shape, 2)
    assert (o.optimizer, o.tensors, o.world_size) == ("AdamW", 3, 2)
    # 3 rows pad to 4: 2 rows of 10 and 2 of 1 a rank; the root 2 rows of 4
    assert (o.full_elements, o.shard_elements) == (49, 20 + 2 + 8)
    assert o.full_s > 0 and o.shard_s > 0


def test_the_projection_adds_the_probe_s_work() -> None:
    # _project's shape: 176 elements, 88 a rank at N = 2
    timed = _optimizer().model_copy(update={"full_elements": 176, "shard_elements": 88})
    # _project's units: blocks b0, b1 and the root ""
    work = {"b0": 0.001, "b1": 0.001, "": 0.002}
    probe = FsdpProbe(
        world_size=2, gather_s=work, reduce_s={"b0": 0.0005, "b1": 0.0005}, optimizer=timed
    )
    bare = _project()
    probed = _project(probe=probe)
    assert bare.optimizer_source == "elements" and bare.copy_s == 0.0
    assert probed.optimizer_source == "probe"
    # no reshard: each unit gathered once (4 ms), each reduce-scattered once (1 ms; the root
    # not timed counts 0)
    assert probed.copy_s == pytest.approx(0.005)
    # a reshard gathers the blocks again in the backward
    assert _project(probe=probe, reshard_after_forward=True).copy_s == pytest.approx(0.007)
    share = 0.6  # the probe timed the shard's 88 elements at 6 ms of the whole's 10
    assert probed.optimizer_share == pytest.approx(share)
    assert probed.optimizer_s == pytest.approx(0.012 * share * 1.5)  # slowed as the compute
    extra = 0.005 + (probed.optimizer_s - bare.optimizer_s)
    assert probed.step_s == pytest.approx(bare.step_s + extra)
    assert probed.low_s < probed.step_s < probed.high_s
    # at N = 1 FSDP2 gathers nothing: no copies
    assert _project(probe=probe, world_size=1).copy_s == 0.0


def test_the_probe_is_read_back_from_the_run_folder(tmp_path: Path) -> None:
    assert read_fsdp_probe(tmp_path) is None
    probe = FsdpProbe(world_size=2, gather_s={"": 0.003}, reduce_s={"": 0.002})
    probe.write(tmp_path / "fsdp_probe.json")
    back = read_fsdp_probe(tmp_path)
    assert back is not None
    assert (back.work_s("", "all_gather"), back.work_s("", "reduce_scatter")) == (0.003, 0.002)
    assert back.work_s("b0", "all_gather") == 0.0


def test_hidden_gathers_cost_what_the_probe_timed_behind_the_compute() -> None:
    plain = FsdpProbe(world_size=2, gather_s={}, reduce_s={})
    timed = plain.model_copy(update={"under_compute_s": {"b0": 0.002, "b1": 0.003, "": 0.5}})
    without = _project(overlap="all_gather", probe=plain, cpu_share=0.5)
    behind = _project(overlap="all_gather", probe=timed, cpu_share=0.5)
    assert (without.interference_source, behind.interference_source) == ("cpu", "probe")
    # both blocks' gathers hide under 72 ms of compute; the root's runs first, on the step, so
    # its timing does not count
    assert behind.hidden_s == pytest.approx(without.hidden_s)
    assert behind.exposed_s == pytest.approx(without.exposed_s - 0.5 * without.hidden_s + 0.005)
    assert behind.interference_s == pytest.approx(0.005)
    assert without.interference_s == pytest.approx(0.5 * without.hidden_s)
    # where nothing runs under the compute there is nothing to take from it
    alone = _project(overlap="none", probe=timed)
    assert alone.exposed_s == pytest.approx(_project(overlap="none").exposed_s)
