"""A win's second pair of fresh processes only where the spread between processes asks.

The arms are GPU arms (timed by CUDA events) over `gpu_costs.EpochJob` workers: on a GPU the
tuner measures a second process of the baseline (its twin) beside the first, and a first win
far beyond how much the two differ is kept without a second pair; where they differ as much
as the win, the second pair runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpu_costs import EpochJob
from torchdoctor.procs import SessionSpec
from torchdoctor.tune.arms import Arm, MeasurePlan, Timeout
from torchdoctor.tune.ladder import LadderPlan, climb
from torchdoctor.tune.outcome import FIRST_PAIR_ONLY, Outcome
from torchdoctor.tune.records import TrialResult
from torchdoctor.tune.sources import ArmSource
from torchdoctor.tune.space import KnobSpec
from torchdoctor.tune.study import Study
from torchdoctor.tune.tuner import Tuner, TuneSettings
from torchdoctor.tune.turns import DeviceTurns

WORKERS = KnobSpec("workers", (False, True), "exact", False)


class EpochJobArms(ArmSource):
    """GPU arms of the cnn-like job; the n-th process opened runs at `factors[n]` of its
    recipe's speed (1 past the list)."""

    def __init__(self, plan: MeasurePlan, factors: list[float]) -> None:
        self.plan, self.turns, self.factors = plan, DeviceTurns(), factors
        self.opened: list[str] = []

    def prepare(self, recipe: dict[str, Any], *, timeout: Timeout, log_path: Path | None) -> Arm:
        n = len(self.opened)
        self.opened.append(log_path.stem if log_path else str(recipe))
        workers = bool(recipe.get("workers"))
        job = EpochJob(
            step_s=0.012 if workers else 0.030,
            restart_s=0.6 if workers else 0.0,
            refill_s=0.002,
            seed=n,
            process_factor=self.factors[n] if n < len(self.factors) else 1.0,
        )
        return Arm(
            recipe=dict(recipe),
            worker=job,  # type: ignore[arg-type]
            objective="throughput",
            release_after_run=True,
            timer="cuda_event",
        )


def ladder_trial(tmp_path: Path, factors: list[float]) -> tuple[TrialResult, EpochJobArms]:
    plan = MeasurePlan(parity_steps=16)
    source = EpochJobArms(plan, factors)
    tuner = Tuner(
        SessionSpec("job", {}, device="cuda"),
        TuneSettings(plan=plan, budget_s=3600, reference_runs=3),
        Study(f"sqlite:///{tmp_path / 'study.db'}"),
        arms=source,
        log_dir=tmp_path,
    )
    try:
        climb(tuner, LadderPlan(space=[WORKERS], search_batch=False, prior=(), confirm=False))
    finally:
        tuner.close()
    (trial,) = [t for t in tuner.trials if isinstance(t, TrialResult) and t.kind == "ladder"]
    return trial, source


def test_a_win_far_beyond_the_twins_spread_is_kept_without_a_second_pair(tmp_path: Path) -> None:
    # The baseline and its twin run within 0.5% of each other; the win is 1.4x.
    trial, source = ladder_trial(tmp_path, factors=[1.0, 1.005])
    assert any("baseline-twin" in name for name in source.opened)
    assert trial.outcome is Outcome.KEPT, trial.reason
    assert trial.reason.startswith(f"{FIRST_PAIR_ONLY}: processes of one recipe differ")
    assert trial.replicate_speedup_vs_best is None
    assert not any("again" in name for name in source.opened)


def test_a_win_within_the_twins_spread_gets_its_second_pair(tmp_path: Path) -> None:
    # The twin runs 40% slower than the baseline's first process: processes differ as much
    # as the win, so a new pair must bear it out.
    trial, source = ladder_trial(tmp_path, factors=[1.0, 1.4])
    assert any("again" in name for name in source.opened)
    assert trial.replicate_speedup_vs_best is not None
    assert trial.outcome is Outcome.KEPT, trial.reason
