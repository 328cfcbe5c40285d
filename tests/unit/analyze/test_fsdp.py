"""FSDP2 in a rank's trace (analyze.fsdp), on recorded 2-rank gloo traces of
tests/zoo/fsdp2_train.py (tests/data/traces/fsdp2_gloo_*, see the folder's README): each unit's
all-gathers and reduce-scatters, forward or backward, prefetched or not, their dtypes and
bytes, and the unsharded peak."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.analyze import analyze_trace, load_rank_traces
from torchdoctor.analyze.fsdp import fsdp_analysis, unsharded_bytes
from torchdoctor.analyze.fsdp_records import FsdpAnalysis

#: The zoo script at --depth 3 --width 256: a block's parameters are LayerNorm (2 x 256),
#: up (256 x 1024 + 1024) and down (1024 x 256 + 256), all-gathered in bf16 (2 bytes).
BLOCK_PARAMS = 2 * 256 + 256 * 1024 + 1024 + 1024 * 256 + 256
BLOCK_BYTES = BLOCK_PARAMS * 2
#: The root's own parameters, inp (256 x 256 + 256) and head (1 x 256 + 1), each padded by
#: fully_shard to a multiple of the world size along dim 0: head.weight (1, 256) becomes
#: (2, 256) and head.bias (1,) becomes (2,).
ROOT_BYTES = (256 * 256 + 256 + 2 * 256 + 2) * 2
UNITS = ["root", "blocks.0", "blocks.1", "blocks.2"]


@pytest.fixture(scope="module")
def reshard(shared_traces: Path) -> list[FsdpAnalysis]:
    found = [fsdp_analysis(tl) for tl in load_rank_traces(shared_traces / "fsdp2_gloo_reshard")]
    assert all(f is not None for f in found)
    return [f for f in found if f is not None]


def test_each_unit_is_found_in_forward_order_with_its_unsharded_bytes(
    reshard: list[FsdpAnalysis],
) -> None:
    for f in reshard:
        assert f.world_size == 2 and f.steps == 2
        assert f.collective_events == "gloo:/nccl: annotations"
        assert [u.name for u in f.units] == UNITS
        assert [u.unsharded_bytes for u in f.units] == [ROOT_BYTES] + 3 * [BLOCK_BYTES]
        assert {u.param_dtype for u in f.units} == {"bfloat16"}
        assert {u.reduce_dtype for u in f.units} == {"bfloat16"}
        assert [u.reduce_bytes for u in f.units] == [u.unsharded_bytes for u in f.units]


def test_resharded_units_are_gathered_again_in_backward(reshard: list[FsdpAnalysis]) -> None:
    for f in reshard:
        # --plant reshard: reshard_after_forward=True on every unit, the root's included
        for u in f.units:
            assert (u.forward_all_gathers, u.backward_all_gathers) == (1.0, 1.0), u.name
        assert f.backward_all_gathers == 4.0
        assert 0 < f.exposed_backward_all_gather_ms <= f.exposed_all_gather_ms


def test_prefetched_all_gathers_are_the_ones_a_prefetch_issued(
    reshard: list[FsdpAnalysis],
) -> None:
    for f in reshard:
        forward = {u.name: u.forward_prefetched for u in f.units}
        # each block prefetches the next in forward; the root and the first block are
        # gathered on entry
        assert forward == {"root": 0.0, "blocks.0": 0.0, "blocks.1": 1.0, "blocks.2": 1.0}
        backward = {u.name: u.backward_prefetched for u in f.units}
        # the last block is prefetched from the root's backward entry, each block from the
        # next one's; the root is gathered on its own entry
        assert backward == {"root": 0.0, "blocks.0": 1.0, "blocks.1": 1.0, "blocks.2": 1.0}
        assert f.prefetched_all_gathers == pytest.approx(5 / 8)


def test_exposed_and_hidden_add_up_within_the_step(reshard: list[FsdpAnalysis]) -> None:
    for f in reshard:
        assert f.step_ms > 0 and f.compute_ms > 0
        parts = (f.exposed_all_gather_ms, f.exposed_reduce_scatter_ms)
        # the total is a union: no less than either part, no more than their sum or the step
        assert max(parts) <= f.exposed_comm_ms <= min(sum(parts), f.step_ms) + 1e-9
        assert f.exposed_comm_ms + f.compute_ms <= f.step_ms + 1e-6
        for u in f.units:
            # a collective's hidden time is the part of its run under compute
            assert 0 <= u.forward_hidden_ms <= u.forward_all_gather_ms + 1e-9
            assert 0 <= u.backward_hidden_ms <= u.backward_all_gather_ms + 1e-9
            assert u.reduce_scatter_ms > 0 and u.reduce_scatter_exposed_ms > 0


def test_the_unsharded_peak_is_what_resharding_keeps(reshard: list[FsdpAnalysis]) -> None:
    for f in reshard:
        # resharded after forward: at most the root and two blocks (the one computing and the
        # one prefetched) are unsharded at once, never all three blocks
        assert f.unsharded_peak_bytes == ROOT_BYTES + 2 * BLOCK_BYTES


def test_the_trace_analysis_carries_it_and_a_trace_without_fsdp_has_none(
    shared_traces: Path,
) -> None:
    whole = analyze_trace(shared_traces / "fsdp2_gloo_reshard")
    assert whole.fsdp is not None and [u.name for u in whole.fsdp.units] == UNITS
    ddp = load_rank_traces(shared_traces / "ddp_gloo_straggler_compute")[0]
    assert fsdp_analysis(ddp) is None
    assert analyze_trace(shared_traces / "ddp_gloo_straggler_compute").fsdp is None


def test_unsharded_bytes_from_the_operators_byte_estimate() -> None:
    # shapes.op_bytes of an all-gather of a 10-byte shard on 2 ranks: 20 + 10 + 20
    assert unsharded_bytes(50.0, 2) == 20
    assert unsharded_bytes(90.0, 4) == 40  # 40 + 10 + 40
    assert unsharded_bytes(float("nan"), 2) is None


def test_an_fp32_reduce_is_read_from_its_collectives(shared_traces: Path) -> None:
    for f in (
        fsdp_analysis(tl) for tl in load_rank_traces(shared_traces / "fsdp2_gloo_fp32_reduce")
    ):
        assert f is not None and [u.name for u in f.units] == UNITS
        assert {u.param_dtype for u in f.units} == {"bfloat16"}
        assert {u.reduce_dtype for u in f.units} == {"float32"}
        # fp32 gradients: twice the bf16 parameters' bytes
        assert [u.reduce_bytes for u in f.units] == [2 * ROOT_BYTES] + 3 * [2 * BLOCK_BYTES]
        # reshard_after_forward=False: nothing gathered in backward, all units held at once
        assert f.backward_all_gathers == 0
        assert f.unsharded_peak_bytes == ROOT_BYTES + 3 * BLOCK_BYTES


def test_a_trace_alone_names_the_fp32_reduce_and_not_ddp(shared_traces: Path) -> None:
    from torchdoctor.diagnose.api import diagnose_trace_analysis

    d = diagnose_trace_analysis(analyze_trace(shared_traces / "fsdp2_gloo_fp32_reduce"))
    rules = {f.rule_id for f in d.findings}
    assert "fsdp_fp32_communication" in rules and "ddp_communication" not in rules


def test_the_ranks_are_compared_at_every_fsdp_collective(shared_traces: Path) -> None:
    # Stragglers as for DDP (analyze.ranks): each step's 4 forward and 4 backward all-gathers
    # and 4 reduce-scatters (gloo all-reduces) matched on both ranks, over the 2 traced steps.
    cross = analyze_trace(shared_traces / "fsdp2_gloo_reshard").cross_rank
    assert cross is not None and cross.collective_events == "gloo:/nccl: annotations"
    assert cross.collectives_matched == 2 * (4 + 4 + 4)
    names = [s.name for s in cross.collectives]
    assert names.count("gloo:all_gather") == 16 and names.count("gloo:all_reduce") == 8
