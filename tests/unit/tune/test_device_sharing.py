"""Whether a study's arms interleave on the GPU or take it in turns, and the A/B in turns.

The decision is read from what the first park measured (`tune.turns.decide_sharing`); the
figures of the real case come from an H200's record (tests/data/gpu_records/): a script
holding 76.90 GiB in a plain tensor, whose parked baseline still held 77.71 GiB when the
quality reference started beside it and ran out of memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from torchdoctor.procs import FailureKind, Parked, ReplyT, Request, WorkerFailure
from torchdoctor.tune import tune
from torchdoctor.tune.arms import Arm
from torchdoctor.tune.records import TrialResult, TuneResult, read_trial
from torchdoctor.tune.turns import PEAK_SLACK, DeviceSharing, SharingMode, decide_sharing
from torchdoctor.tune.whole_runs import run_in_turns
from tune_sim import FAST_KNOB, sim_config

DATA = Path(__file__).parents[2] / "data" / "gpu_records"
GIB = 2**30


def _h200_figures() -> dict[str, int]:
    """The device's figures in the H200 record's out-of-memory message, in bytes."""
    text = (DATA / "h200_tune_ballast.err").read_text()

    def gib(pattern: str) -> int:
        match = re.search(pattern, text)
        assert match is not None, pattern
        return int(float(match.group(1)) * GIB)

    return {
        "allocate": gib(r"Tried to allocate ([\d.]+) GiB"),
        "capacity": gib(r"total capacity of ([\d.]+) GiB"),
        "parked_process": gib(r"Process \d+ has ([\d.]+) GiB memory in use"),
    }


def test_the_h200_job_fits_alone_not_twice_so_its_arms_take_turns() -> None:
    h200 = _h200_figures()
    # The parked baseline: its plain tensor stayed (parking moves what an optimizer steps);
    # the device's own count is everything that process held, its context included.
    parked = Parked(
        moved_bytes=0,
        left_bytes=h200["allocate"],
        total_bytes=h200["capacity"],
        free_bytes=h200["capacity"] - h200["parked_process"],
    )
    sharing = decide_sharing(parked, peak_bytes=h200["allocate"])
    assert sharing.mode == "turns" and sharing.in_turns
    assert sharing.stayed_bytes == h200["allocate"]
    assert sharing.held_bytes == h200["parked_process"]
    # What a second process takes beyond its tensors: the parked one's excess (its context).
    assert sharing.context_bytes == h200["parked_process"] - h200["allocate"]
    assert "fits alone, not twice" in sharing.reason and "76.9 GiB stayed" in sharing.reason
    assert sharing.out_of_memory().startswith("the job fits the GPU alone, not twice")
    assert "arms run in turns" in sharing.out_of_memory()
    assert sharing.note().startswith("arms ran one process on the GPU at a time, in turns")
    # The record keeps the bytes it rests on, in its versioned JSON form.
    again = DeviceSharing.from_json_dict(sharing.to_json_dict())
    assert again == sharing


def test_the_same_job_with_everything_parked_interleaves() -> None:
    """Had the 76.90 GiB been trained state, parking would have moved it: only the parked
    process's context stays, and a second process of the same peak fits beside it."""
    h200 = _h200_figures()
    context = h200["parked_process"] - h200["allocate"]
    parked = Parked(
        moved_bytes=h200["allocate"],
        left_bytes=0,
        total_bytes=h200["capacity"],
        free_bytes=h200["capacity"] - context,
    )
    sharing = decide_sharing(parked, peak_bytes=h200["allocate"])
    assert sharing.mode == "interleaved", sharing.reason
    assert sharing.reason.startswith("two processes fit")


def test_the_peak_slack_decides_at_the_edge() -> None:
    """A second process fits when held + context + peak * (1 + slack) is within capacity."""
    capacity, held = 100 * GIB, 40 * GIB
    parked = Parked(left_bytes=held, total_bytes=capacity, free_bytes=capacity - held)
    room = capacity - held
    fits = int(room / (1 + PEAK_SLACK)) - GIB // 10
    assert decide_sharing(parked, fits).mode == "interleaved"
    assert decide_sharing(parked, int(room / (1 + PEAK_SLACK)) + GIB // 10).mode == "turns"


def test_a_park_that_read_no_device_keeps_the_arms_interleaved() -> None:
    sharing = decide_sharing(Parked(moved_bytes=5, left_bytes=7), peak_bytes=10)
    assert sharing.mode == "interleaved" and "not read" in sharing.reason


class Worker:
    """A worker that only closes (the runs here are timed by the test's own function)."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def request(self, message: Request[ReplyT], *, timeout_s: float) -> ReplyT:
        raise AssertionError(f"no request expected, got {message!r}")

    def close(self) -> None:
        self.log.append(f"close {self.name}")


def _opener(log: list[str], live: list[int]) -> Callable[[str], Arm]:
    """Opens an arm of a side, asserting no other process lives; logs opens and closes."""

    def open_arm(side: str) -> Arm:
        assert live[0] == 0, "a run started while another process lived"
        live[0] += 1
        log.append(f"open {side}")
        arm = Arm(recipe={"side": side}, worker=Worker(log, side), objective="throughput")
        arm.samples_per_step = 10.0
        arm.losses = [1.0, 0.9] if side == "candidate" else [1.0, 0.95]
        real_close = arm.close

        def close() -> None:
            live[0] -= 1
            real_close()

        arm.close = close  # type: ignore[method-assign]
        return arm

    return open_arm


def test_whole_runs_go_in_abba_order_one_process_at_a_time() -> None:
    log: list[str] = []
    live = [0]
    open_arm = _opener(log, live)
    scores = {"best": 2.0, "candidate": 1.0}  # seconds per sample: the candidate twice as fast
    runs = run_in_turns(
        open_arm,
        lambda arm: scores[str(arm.recipe["side"])],
        pairs=4,
        losses=lambda arm: arm.losses.append(0.8),
    )
    opened = [line.split()[1] for line in log if line.startswith("open")]
    assert opened == ["candidate", "best", "best", "candidate"] * 2
    assert live == [0] and log.count("close candidate") == log.count("close best") == 4
    assert runs.pairs == 4 and runs.losses == [1.0, 0.9, 0.8]
    assert runs.rate("candidate") == pytest.approx(1.0) and runs.rate("best") == 0.5
    est = runs.estimate(confidence=0.95)
    assert est.speedup == pytest.approx(2.0)
    assert est.ci_low == pytest.approx(2.0) and est.ci_high == pytest.approx(2.0)


def test_a_stop_on_the_first_candidate_run_ends_the_runs() -> None:
    log: list[str] = []
    live = [0]
    open_arm = _opener(log, live)
    runs = run_in_turns(
        open_arm,
        lambda arm: 1.0,
        pairs=3,
        stop=lambda arm: "does not apply",
    )
    assert runs.stopped == "does not apply" and runs.pairs == 0
    assert log == ["open candidate", "close candidate"] and live == [0]


def test_a_run_that_fails_is_ended_and_the_failure_raised() -> None:
    log: list[str] = []
    live = [0]
    open_arm = _opener(log, live)

    def time_run(arm: Arm) -> float:
        if arm.recipe["side"] == "best":
            raise WorkerFailure(FailureKind.OOM, "CUDA out of memory")
        return 1.0

    with pytest.raises(WorkerFailure, match="out of memory"):
        run_in_turns(open_arm, time_run, pairs=3)
    assert live == [0] and log[-1] == "close best"


@pytest.mark.parametrize("asked", [None, "turns"])
def test_a_cpu_study_shares_no_device_and_records_no_mode(
    tmp_path: Path, asked: SharingMode | None
) -> None:
    """On a CPU no arm joins the turns, even asked to: no decision, no note, no mode on any
    record, the arms interleaved as ever."""
    config = sim_config([FAST_KNOB], effects={"fast": {"True": 0.5}})
    config = config.model_copy(update={"device_sharing": asked})
    result = tune(config=config, out=tmp_path / "run")
    assert result.device_sharing is None
    assert not any(n.startswith("arms ran") for n in result.notes)
    trials = [read_trial(p) for p in sorted((tmp_path / "run" / "trials").glob("*.json"))]
    trials = [t for t in trials if isinstance(t, TrialResult)]
    assert trials and all(t.sharing_mode is None and t.device_switch_s is None for t in trials)
    stored = TuneResult.read(tmp_path / "run" / "tune.json")
    assert stored.device_sharing is None and result.best_recipe == {"fast": True}


def test_the_screen_says_a_trial_ran_in_turns() -> None:
    from torchdoctor.report.terminal.live import row_of
    from torchdoctor.tune.outcome import Outcome

    common = {"recipe": {}, "status": "ok", "sharing_mode": "turns"}
    baseline = TrialResult(
        key="b", kind="baseline", step=0, decision="baseline", outcome=Outcome.BASELINE, **common
    )
    assert "arms take turns on the GPU" in row_of(baseline).why
    ladder = TrialResult(
        key="l",
        kind="ladder",
        step=1,
        change={"fast": True},
        decision="kept",
        outcome=Outcome.KEPT,
        chunk_times_s=[1.0, 1.1, 0.9, 1.0],
        speedup_vs_best=1.5,
        speedup_vs_best_ci=(1.3, 1.7),
        **common,
    )
    assert row_of(ladder).why == "in turns: 4 pairs of whole runs"
    interleaved = ladder.model_copy(update={"sharing_mode": "interleaved"})
    assert row_of(interleaved).why == ""
