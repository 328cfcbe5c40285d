"""Replicates: how much processes of one recipe differ, and a win's second pair of processes.

Two live processes of one recipe can differ by a few percent, steadily enough that paired
chunks prove the difference, so a ladder win's first A/B compares two processes as much as two
recipes. A win is kept only when a second pair of fresh processes points the same way
(`Replicates.second_pair`), unless the spread between processes measured so far is far less
than the win (`Replicates.spared`, `measure.second_pair_needed`). That spread is measured from
each second pair's rates against its first pair's and, on a GPU, from a twin of the baseline
(`Replicates.measure_twin`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from torchdoctor.measure import PairedSpeedup, ProcessSpread, process_spread, second_pair_needed
from torchdoctor.procs import WorkerFailure
from torchdoctor.tune.arms import (
    REPLICATE_THRESHOLD,
    SPREAD_CONFIDENCE,
    Arm,
    MeasurePlan,
    OpenArm,
    Timeout,
    interleave_fresh_pair,
    measure_alone,
)
from torchdoctor.tune.decision import SpeedCheck
from torchdoctor.tune.outcome import (
    FIRST_PAIR_ONLY,
    NOT_REPRODUCED,
    Outcome,
    Verdict,
    failure_outcome,
)


class Replicates:
    """The spread between processes of one recipe as measured so far (`process_log_ratios`)
    and the second pairs and twin that measure it; arms come from `open_arm`."""

    def __init__(
        self,
        plan: MeasurePlan,
        *,
        open_arm: OpenArm,
        timeout: Timeout,
        past_deadline: Callable[[], bool],
    ) -> None:
        self.plan = plan
        self.open_arm = open_arm
        self.timeout = timeout
        self.past_deadline = past_deadline
        #: Log rate ratios of two processes of one recipe (a win's first and second pair):
        #: the spread between processes a later win's second pair is decided by
        #: (`measure.second_pair_needed`)
        self.process_log_ratios: list[float] = []

    def spared(self, ci_low: float) -> str | None:
        """Why a win whose interval starts at `ci_low` needs no second pair (the spread
        between processes measured so far is far less), or None when it does."""
        spread = process_spread(self.process_log_ratios)
        if spread is not None and not second_pair_needed(
            ci_low, spread, confidence=SPREAD_CONFIDENCE
        ):
            return _spread_reason(spread, ci_low)
        return None

    def measure_twin(self, arm: Arm, recipe: dict[str, Any]) -> None:
        """On a GPU: a second process of the baseline recipe, scored alone as the first was,
        their log rate ratio the study's first measure of how much processes of one recipe
        differ (`process_log_ratios`), so that a first win far beyond it needs no second pair.

        Where a process start costs 10 s and a step milliseconds (H200 records, 2026-11-28),
        one more process of the baseline (started ahead, `procs.WorkerPool`) costs its build
        and a few seconds of steps; the second pair it can spare costs two starts and an A/B.
        A twin that fails is no failure of the baseline: the second pair runs as before.
        """
        try:
            twin = self.open_arm(recipe, "baseline-twin")
        except WorkerFailure:
            return
        try:
            measure_alone(twin, self.plan, timeout=self.timeout)
            if arm.chunk_scores and twin.chunk_scores:
                self.process_log_ratios.append(math.log(arm.rate() / twin.rate()))
        except WorkerFailure:
            pass
        finally:
            twin.close(at_once=True)

    def second_pair(
        self,
        best_recipe: dict[str, Any],
        recipe: dict[str, Any],
        first_rates: tuple[float | None, float],
        *,
        first: PairedSpeedup,
        kept: Verdict,
    ) -> tuple[Verdict, PairedSpeedup | None, Arm | None, Arm | None]:
        """The same A/B again on a second pair of fresh processes: a win is kept only when
        this pair points the same way (`arms.REPLICATE_CONFIDENCE` says how sure, and why
        the direction rather than the first pair's bar). The first pair's arms (whose rates
        are `first_rates`, best's and the candidate's) are closed before it starts, so at
        most two processes run.

        Two live processes of one recipe can differ by a few percent, steadily enough that
        paired chunks prove the difference (`benchmarks/bench_script_noop.py` measures how
        often a do-nothing change clears the ladder's bar; benchmarks/RESULTS.md, "A win is
        proven twice"): the first A/B compares two processes as much as two recipes. A new
        process of each recipe draws that difference afresh, so a do-nothing change must be
        lucky twice.

        Returns the trial's verdict (`kept` when the win holds or the budget cut the second
        pair), the second pair's estimate (None when it did not finish), the arm the trial
        ends with (the fresh candidate when the win holds: the next best, else None) and the
        fresh best when the win did not hold (the live best from here, else None).
        """
        try:
            est, best2, cand2 = interleave_fresh_pair(
                self.open_arm, best_recipe, recipe, self.plan, timeout=self.timeout
            )
        except WorkerFailure as exc:
            if failure_outcome(exc.kind) is Outcome.TIMEOUT and self.past_deadline():
                # The budget ran out, not the recipe: the win stands on its first pair, and
                # the final A/B against the baseline (in its reserve) still checks it.
                why = f"{FIRST_PAIR_ONLY}: the budget ran out during the second"
                return replace(kept, reason=why), None, None, None
            failed = Verdict.failure(
                exc.kind, f"a second pair of fresh processes failed: {exc.reason}"
            )
            return replace(failed, loss_deviation=kept.loss_deviation), None, None, None
        # Two processes of each recipe measured: the spread between processes (the first and
        # second pair's rates of one recipe), by which later wins may need no second pair.
        for rate, again_rate in zip(first_rates, (best2.rate(), cand2.rate()), strict=True):
            if rate and again_rate:
                self.process_log_ratios.append(math.log(rate / again_rate))
        check = SpeedCheck(est, REPLICATE_THRESHOLD)
        if check.faster:
            best2.close(at_once=True)
            return kept, est, cand2, None
        cand2.close(at_once=True)
        reason = check.reason().removeprefix("not a proven win: ")
        rejected = replace(
            kept,
            outcome=Outcome.NOT_REPRODUCED,
            reason=f"{NOT_REPRODUCED}: {reason} (the first pair: {first.speedup:.3f}x "
            f"[{first.ci_low:.3f}, {first.ci_high:.3f}])",
        )
        return rejected, est, None, best2


def _spread_reason(spread: ProcessSpread, ci_low: float) -> str:
    """Why a win was kept without a second pair: the processes' measured spread."""
    upper = spread.upper(SPREAD_CONFIDENCE)
    return (
        f"{FIRST_PAIR_ONLY}: processes of one recipe differ by {spread.sd:.1%} "
        f"(at most {upper:.1%}, {spread.pairs} pairs), far less than its least gain "
        f"{ci_low - 1:.1%}"
    )
