"""What a trial's parts cost here, measured: the budget's estimates are built from them.

A trial is made of parts: a fresh worker process (its start, its prepare and its warm-up,
`open_s`), the chunks of its A/B (two per round, `chunk_s` each), for the final A/B steady
steps (`step_s` each), and a process's close (`close_s`: its exit, which the kernel's teardown
of its memory makes about 0.8 s on a 2-core EPYC whether or not the interpreter tears down). On
a GPU a process start costs about 10 s and a step a few milliseconds (the H200 records: a cnn
baseline of 12.6 s, of which 10.4 s before its first chunk, at 32 ms a step); on a 2-core CPU
the start is a few seconds and the chunks are what cost. A trial's estimate is its parts at the
prices measured here, so it follows the device, and a trial the deadline cut, or a win with its
second pair of processes, does not make every later trial look as long as it was.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchdoctor import measure
from torchdoctor.measure import MIN_REPLICATES, steady_steps
from torchdoctor.tune.budget import BUDGET_GRACE_S

if TYPE_CHECKING:
    from torchdoctor.tune.arms import MeasurePlan
    from torchdoctor.tune.records import TrialResult


@dataclass(frozen=True)
class TrialCosts:
    """Seconds each part of a trial costs here.

    `open_s`: a fresh arm, from asking for it to warmed up (process start, prepare, warm-up);
    `step_s`: one steady step; `chunk_s`: one arm's A/B chunk (`measure.chunk_steps` steps);
    `close_s`: an arm ended, from asking to its process reaped.
    """

    open_s: float
    step_s: float
    chunk_s: float
    close_s: float = 0.0

    @classmethod
    def of(
        cls, *, open_s: float, step_s: float, plan: MeasurePlan, close_s: float = 0.0
    ) -> TrialCosts:
        steps = measure.chunk_steps(step_s, least=plan.chunk_steps, min_chunk_s=plan.min_chunk_s)
        return cls(open_s=open_s, step_s=step_s, chunk_s=steps * step_s, close_s=close_s)

    def first_look_s(self, plan: MeasurePlan) -> float:
        """An A/B to its first look (its settle rounds and `min_rounds` scored ones, two
        chunks each): where a clear win or loss, the common trial, stops."""
        rounds = plan.settle_rounds + min(plan.min_rounds, plan.rounds)
        return rounds * 2 * self.chunk_s

    def ladder_trial_s(self, plan: MeasurePlan) -> float:
        """One ladder trial: a fresh candidate against the live best, to its first look, and
        one arm ended (the candidate, or the best it replaces)."""
        return self.open_s + self.first_look_s(plan) + self.close_s

    def whole_run_s(self, plan: MeasurePlan) -> float:
        """One whole run of an A/B in turns (`tune.whole_runs`): a fresh process measured
        alone, its chunks one after the other, then ended."""
        rounds = plan.settle_rounds + min(plan.min_rounds, plan.rounds)
        return self.open_s + rounds * self.chunk_s + self.close_s

    def second_pair_s(self, plan: MeasurePlan) -> float:
        """A win's second pair of fresh processes (`Tuner._replicate`): two opens, one A/B,
        two closes."""
        return 2 * (self.open_s + self.close_s) + self.first_look_s(plan)

    def baseline_s(self, plan: MeasurePlan, *, reference_runs: int) -> float:
        """The baseline: one arm, its chunks alone, and its quality yardstick's retrainings."""
        rounds = plan.settle_rounds + min(plan.min_rounds, plan.rounds)
        return (
            self.open_s + rounds * self.chunk_s + reference_runs * plan.parity_steps * self.step_s
        )

    def pair_s(self) -> float:
        """One fresh process pair of the final A/B: each process opened (started and warmed
        up), timed over `run`'s steady window (`confirm.measure_fresh_pairs`) and ended."""
        return 2 * (self.open_s + steady_steps(self.step_s) * self.step_s + self.close_s)

    def confirm_s(self, pairs: int = MIN_REPLICATES) -> float:
        """The final A/B's `pairs` fresh process pairs."""
        return pairs * self.pair_s()


def opened_s(baseline: TrialResult, plan: MeasurePlan) -> float:
    """The baseline's open (start to warmed up) read from its record: its measured wall time
    less its chunks (settle and scored) and the parity steps run after them."""
    step_s = baseline.step_time_s or 0.0
    costs = TrialCosts.of(open_s=0.0, step_s=step_s, plan=plan)
    chunks = plan.settle_rounds + len(baseline.chunk_times_s)
    per_chunk = costs.chunk_s / step_s if step_s > 0 else plan.chunk_steps
    after = max(0.0, plan.parity_steps - plan.warmup_steps - chunks * per_chunk)
    return max(0.0, baseline.wall_s - chunks * costs.chunk_s - after * step_s)


def measured_costs(
    baseline: TrialResult,
    best: TrialResult | None,
    opens_s: Sequence[float],
    plan: MeasurePlan,
    closes_s: Sequence[float] = (),
) -> TrialCosts:
    """The parts' costs as measured so far: the median open of the arms opened (the
    baseline's record's own when none was, a resumed study), the median close of those ended
    (none before the first), the best recipe's step."""
    open_s = statistics.median(opens_s) if opens_s else opened_s(baseline, plan)
    close_s = statistics.median(closes_s) if closes_s else 0.0
    step_s = (best.step_time_s if best is not None else None) or baseline.step_time_s or 0.0
    return TrialCosts.of(open_s=open_s, step_s=step_s, plan=plan, close_s=close_s)


def confirm_steps(baseline: TrialResult) -> int:
    """Steady steps each confirmation process times: `run`'s default window at the
    baseline's step time (`measure.steady_steps`: at least 30 steps and 3 s)."""
    return steady_steps(baseline.step_time_s or 0.0)


def pair_cost_s(
    baseline: TrialResult | None, best_trial: TrialResult | None, costs: TrialCosts | None
) -> float:
    """Seconds one fresh process pair of the final confirmation is expected to take, by its
    parts at the costs measured here (`TrialCosts.pair_s`: two opens, two steady windows and
    two closes), plus the best recipe's warm-up beyond the baseline's (a compiled recipe
    compiles again in its fresh process).

    Not the baseline's whole measurement per process: that holds its chunks (settle and
    scored rounds), which a confirmation process does not run, and each open is already warmed
    up. On a 2-core EPYC (2026-11-28) that price was about 25 s a pair where the pairs took
    21-22 s, and the reserve of three kept `demo --quick`'s ladder from its next knob; without
    the closes it was 17.9 s a pair where they took 21.5 s (2026-11-29).
    """
    if baseline is None or costs is None:
        return 0.0
    extra_warmup_s = 0.0
    if best_trial is not None:
        extra_warmup_s = max(0.0, (best_trial.warmup_s or 0.0) - (baseline.warmup_s or 0.0))
    return costs.pair_s() + extra_warmup_s


def confirm_cost_s(
    baseline: TrialResult | None, best_trial: TrialResult | None, costs: TrialCosts | None
) -> float:
    """Seconds the ladder leaves for the final confirmation: its fewest pairs.

    `measure.MIN_REPLICATES` pairs, not `confirm.CONFIRM_PAIRS`: a ladder that runs to its
    deadline leaves the least that still gives an interval, and one that finishes early leaves
    the confirmation time for all its pairs.
    """
    return MIN_REPLICATES * pair_cost_s(baseline, best_trial, costs)


def story_s(
    costs: TrialCosts,
    plan: MeasurePlan,
    *,
    knobs: int,
    reference_runs: int,
    wins: int = 1,
    pairs: int = MIN_REPLICATES,
    twin: bool = False,
) -> float:
    """A whole study's budget at these costs: the baseline, a ladder trial per knob, a second
    pair of processes for each of `wins` wins, the final A/B's `pairs` and the grace of the
    last request; with `twin`, the baseline's second process that measures the spread between
    processes up front (a GPU's arms: `Tuner._measure_twin`)."""
    return (
        costs.baseline_s(plan, reference_runs=reference_runs)
        + (costs.baseline_s(plan, reference_runs=0) if twin else 0.0)
        + knobs * costs.ladder_trial_s(plan)
        + wins * costs.second_pair_s(plan)
        + costs.confirm_s(pairs)
        + BUDGET_GRACE_S
    )


def study_budget_s(
    *,
    open_s: float,
    step_s: float,
    plan: MeasurePlan,
    knobs: int,
    twin: bool = False,
    close_s: float = 0.0,
) -> float:
    """The budget a study of `knobs` ladder trials needs where a process takes `open_s` to
    start and warm up, a step `step_s` and an end `close_s` (`story_s`: the baseline with its
    quality yardstick, its twin on a GPU, a win's second pair, the final A/B's fewest pairs)."""
    from torchdoctor.tune.parity import REFERENCE_RUNS

    costs = TrialCosts.of(open_s=open_s, step_s=step_s, plan=plan, close_s=close_s)
    return story_s(costs, plan, knobs=knobs, reference_runs=REFERENCE_RUNS, twin=twin)
