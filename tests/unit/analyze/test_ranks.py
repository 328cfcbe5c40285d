"""Across ranks: per-rank phases, skew at the collectives, stragglers and their cause, on
recorded 2-rank gloo traces (tests/data/traces/ddp_gloo_straggler_*) and fake jobs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from rank_jobs import XFER_MS, write_job

from torchdoctor.analyze import analyze_ranks, analyze_trace, load_rank_traces
from torchdoctor.analyze.rank_records import CrossRankAnalysis
from torchdoctor.analyze.ranks import STRAGGLER_MIN_WAIT_SHARE, cross_rank_analysis

#: The data straggler's planted delay per batch (tests/zoo/ddp_straggler.py --delay-ms).
PLANTED_DELAY_MS = 40.0


@pytest.fixture(scope="module")
def recorded_data(shared_traces: Path) -> CrossRankAnalysis:
    cross = analyze_trace(shared_traces / "ddp_gloo_straggler_data").cross_rank
    assert cross is not None
    return cross


def test_recorded_data_straggler_is_rank_1_waiting_on_data(
    recorded_data: CrossRankAnalysis,
) -> None:
    cross = recorded_data
    assert cross.world_size == 2 and cross.skew_method == "clock"
    assert cross.collective_events == "gloo:/nccl: annotations"
    assert cross.collectives_matched == 3  # one all-reduce in each of the 3 traced steps
    assert [s.last_rank for s in cross.collectives] == [1, 1, 1]
    [straggler] = cross.stragglers
    assert (straggler.rank, straggler.cause) == (1, "data")
    assert straggler.phrase == "rank 1 waits on data"
    r0, r1 = cross.rank_phases(0), cross.rank_phases(1)
    assert r0 is not None and r1 is not None
    # rank 1 waits for its batch about the planted delay longer than rank 0 does ...
    assert r1.data_wait_ms - r0.data_wait_ms > 0.75 * PLANTED_DELAY_MS
    # ... and rank 0 spends that time waiting in the all-reduce: most of its exposed comm
    assert r0.wait_ms > 0.75 * r0.exposed_comm_ms and r1.wait_ms == 0.0
    assert r0.exposed_comm_ms > 5 * r1.exposed_comm_ms
    # the wait is counted once: the phases add up to the step
    parts = ("data_wait_ms", "forward_ms", "backward_ms", "exposed_comm_ms", "optimizer_ms")
    assert sum(getattr(r0, p) for p in parts) + r0.other_ms == pytest.approx(r0.step_ms)


def test_recorded_compute_straggler_is_rank_1_computing_slower(shared_traces: Path) -> None:
    cross = analyze_trace(shared_traces / "ddp_gloo_straggler_compute").cross_rank
    assert cross is not None
    [straggler] = cross.stragglers
    assert (straggler.rank, straggler.cause) == (1, "compute")
    assert straggler.excess_ms["compute"] > max(
        v for k, v in straggler.excess_ms.items() if k != "compute"
    )
    r0, r1 = cross.rank_phases(0), cross.rank_phases(1)
    assert r0 is not None and r1 is not None
    assert r1.forward_ms + r1.backward_ms > 3 * (r0.forward_ms + r0.backward_ms)


def test_without_a_shared_clock_the_durations_name_the_same_straggler(
    shared_traces: Path,
) -> None:
    timelines = load_rank_traces(shared_traces / "ddp_gloo_straggler_data")
    apart = [
        dataclasses.replace(tl, meta=dataclasses.replace(tl.meta, host_name=f"host{i}"))
        for i, tl in enumerate(timelines)
    ]
    cross = cross_rank_analysis(apart)
    assert cross is not None and cross.skew_method == "duration"
    assert [(s.rank, s.cause) for s in cross.stragglers] == [(1, "data")]


def test_a_folder_analysis_keeps_each_rank(shared_traces: Path) -> None:
    whole, per_rank = analyze_ranks(shared_traces / "ddp_gloo_straggler_data")
    assert [a.rank for a in per_rank] == [0, 1]
    assert whole.cross_rank is not None and [r.rank for r in whole.ranks] == [0, 1]


def test_fake_job_three_ranks_the_late_one_is_named_with_its_wait(tmp_path: Path) -> None:
    steps = 4
    data = [[1.0, 1.0, 21.0]] * steps  # rank 2 waits 20 ms more for its batch
    compute = [[3.0, 3.0, 3.0]] * steps
    cross = cross_rank_analysis(load_rank_traces(write_job(tmp_path, data, compute)))
    assert cross is not None and cross.skew_method == "clock"
    assert cross.collectives_matched == steps
    assert all(s.skew_ms == pytest.approx(20.0) for s in cross.collectives)
    [straggler] = cross.stragglers
    assert (straggler.rank, straggler.cause) == (2, "data")
    assert straggler.imposed_wait_ms == pytest.approx(20.0)
    for rank in (0, 1):
        p = cross.rank_phases(rank)
        assert p is not None
        assert p.wait_ms == pytest.approx(20.0)
        assert p.exposed_comm_ms == pytest.approx(20.0 + XFER_MS)


def test_fake_job_lateness_that_moves_between_ranks_is_no_straggler(tmp_path: Path) -> None:
    data = [[1.0, 9.0], [9.0, 1.0], [1.0, 9.0], [9.0, 1.0]]
    compute = [[3.0, 3.0]] * 4
    cross = cross_rank_analysis(load_rank_traces(write_job(tmp_path, data, compute)))
    assert cross is not None and cross.collectives_matched == 4
    # each rank is last at half the collectives, and costs the other 8 ms of a 13 ms step
    # there: a sizeable wait, but no one rank's
    assert [s.last_rank for s in cross.collectives] == [1, 0, 1, 0]
    assert cross.stragglers == []


def test_fake_job_small_lateness_is_no_straggler(tmp_path: Path) -> None:
    compute = [[10.0, 10.0 + 10.0 * STRAGGLER_MIN_WAIT_SHARE / 4]] * 3
    cross = cross_rank_analysis(load_rank_traces(write_job(tmp_path, [[1.0, 1.0]] * 3, compute)))
    assert cross is not None
    assert all(s.last_rank == 1 for s in cross.collectives)
    assert cross.stragglers == []


def test_fake_job_slower_compute_is_compute(tmp_path: Path) -> None:
    compute = [[3.0, 15.0]] * 3
    cross = cross_rank_analysis(load_rank_traces(write_job(tmp_path, [[1.0, 1.0]] * 3, compute)))
    assert cross is not None
    assert [(s.rank, s.cause, s.phrase) for s in cross.stragglers] == [
        (1, "compute", "rank 1 computes slower")
    ]


def test_one_rank_or_no_common_collective(tmp_path: Path) -> None:
    folder = write_job(tmp_path, [[1.0, 1.0]], [[3.0, 3.0]])
    timelines = load_rank_traces(folder)
    assert cross_rank_analysis(timelines[:1]) is None
    bare = [
        dataclasses.replace(tl, name_id=tl.name_id.copy(), names=["x"] * len(tl.names))
        for tl in timelines
    ]
    cross = cross_rank_analysis(bare)
    assert cross is not None and cross.collectives_matched == 0 and cross.stragglers == []
    assert any("no collective" in n for n in cross.notes)


def test_the_record_round_trips(recorded_data: CrossRankAnalysis, tmp_path: Path) -> None:
    path = recorded_data.write(tmp_path / "cross_rank.json")
    assert CrossRankAnalysis.read(path) == recorded_data


def test_a_real_nccl_trace_matches_its_communication_kernels(shared_traces: Path) -> None:
    """A real A100 NCCL rank (one of 16, HolisticTraceAnalysis) paired with itself as rank 1:
    its NCCL kernels are the collectives, every one matched, none late, no straggler."""
    [tl] = load_rank_traces(shared_traces / "hta_a100_ws16_rank0.json.gz")
    twin = dataclasses.replace(tl, meta=dataclasses.replace(tl.meta, rank=1))
    cross = cross_rank_analysis([tl, twin])
    assert cross is not None and cross.collective_events == "nccl kernels"
    assert cross.collectives_matched > 0 and cross.max_skew_ms == 0.0
    assert cross.stragglers == []
    r0 = cross.rank_phases(0)
    assert r0 is not None and r0.comm_ms > 0


def test_fake_job_whose_ranks_number_their_steps_apart_is_matched_by_order(
    tmp_path: Path,
) -> None:
    data = [[1.0, 11.0]] * 3
    folder = write_job(tmp_path, data, [[3.0, 3.0]] * 3, first_step=[5, 105])
    cross = cross_rank_analysis(load_rank_traces(folder))
    assert cross is not None and cross.collectives_matched == 3
    assert any("matched by order" in n for n in cross.notes)
    assert [(s.rank, s.cause) for s in cross.stragglers] == [(1, "data")]
