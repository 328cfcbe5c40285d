"""`compare`: interleaved A/B/A/B rounds, ratio of medians with a CI, a verdict per candidate.

Timing A for ten seconds and then B for ten seconds confounds the comparison with whatever
changed in between (another tenant starting, thermal throttling, a frequency step). Rounds
interleave one block of every candidate, in an order shuffled each round (seeded) so no
candidate always runs right after another, and drifts land on all of them alike.

Stopping is on precision only (every interval narrower than the target, or the budget spent),
never on the verdict: stopping as soon as a difference looks significant would inflate the
false-positive rate (the optional-stopping problem).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final

from pydantic import Field

from torchdoctor.core.errors import MeasureError
from torchdoctor.core.load import MachineLoad
from torchdoctor.core.records import Record
from torchdoctor.measure._measurement import Measurement, load_warnings, summarize
from torchdoctor.measure._ratio import (
    DEFAULT_MIN_EFFECT,
    MIN_SAMPLES_PER_SIDE,
    RatioEstimate,
    compare_samples,
)
from torchdoctor.measure._resample import BOOTSTRAP_RESAMPLES
from torchdoctor.measure._timer import WARMUP_FRACTION, Clock, Statement, Timer

#: Rounds before the first precision check: fewer cannot support a bootstrap interval.
MIN_ROUNDS: Final = 10
#: Re-check the intervals each time the round count grows by this factor.
CHECK_GROWTH: Final = 1.25
#: Bootstrap resamples for the in-loop precision checks: they only need the interval's width
#: to a few percent, so a fifth of the final interval's resamples keeps the checks cheap.
CHECK_RESAMPLES: Final = 400
#: Block sizing target per candidate (torch.utils.benchmark's default min_run_time).
BLOCK_SIZING_RUN_TIME: Final = 0.2


class Comparison(Record):
    """Measurements of every candidate and, for each non-baseline one, its ratio estimate."""

    schema_name: ClassVar[str] = "comparison"
    #: Version 2: `machine_load`, the other work on the machine during the rounds.
    schema_version: ClassVar[int] = 2

    baseline: str
    measurements: dict[str, Measurement]
    estimates: dict[str, RatioEstimate]
    rounds: int = Field(ge=0)
    budget_s: float
    confidence: float
    warnings: list[str] = Field(default_factory=list)
    machine_load: MachineLoad | None = None

    def with_load(self, load: MachineLoad | None) -> Comparison:
        """A copy carrying `load`, and its warning when the machine was disturbed."""
        return self.model_copy(
            update={"machine_load": load, "warnings": [*self.warnings, *load_warnings(load)]}
        )


def _rel_halfwidth(est: RatioEstimate) -> float:
    return (est.ci_high - est.ci_low) / (2.0 * est.speedup) if est.speedup > 0 else math.inf


def _validate(candidates: Mapping[str, Statement], baseline: str, budget_s: float) -> None:
    if len(candidates) < 2:
        raise MeasureError(
            f"compare needs at least two candidates, got {len(candidates)}",
            hint="pass the baseline and at least one candidate",
        )
    if baseline not in candidates:
        raise MeasureError(
            f"baseline {baseline!r} is not one of the candidates {sorted(candidates)}"
        )
    if not (budget_s > 0 and math.isfinite(budget_s)):
        raise MeasureError(f"budget {budget_s!r} s must be a positive number of seconds")


def compare(
    candidates: Mapping[str, Statement],
    *,
    baseline: str,
    setup: Statement = "pass",
    globals: dict[str, Any] | None = None,
    budget_s: float = 10.0,
    confidence: float = 0.95,
    target_rel_ci: float = 0.01,
    min_effect: float = DEFAULT_MIN_EFFECT,
    device: str | None = None,
    clock: Clock | None = None,
    sync: Callable[[], None] | None = None,
    seed: int = 0,
) -> Comparison:
    """Time every candidate in interleaved rounds and compare each to `baseline`.

    Stops when every speedup interval is within ±`target_rel_ci` or after `budget_s` seconds.
    """
    _validate(candidates, baseline, budget_s)
    if not 0.0 < confidence < 1.0:
        raise MeasureError(f"confidence {confidence!r} is not between 0 and 1", hint="e.g. 0.95")
    timers = {
        name: Timer(stmt, setup, globals, device=device, clock=clock, sync=sync, label=name)
        for name, stmt in candidates.items()
    }
    now = clock or time.perf_counter
    start = now()
    sizing = min(BLOCK_SIZING_RUN_TIME, budget_s / (4 * len(timers)))
    numbers = {name: t.estimate_block_size(sizing) for name, t in timers.items()}
    warnings = [
        f"{name}: warm-up did not settle"
        for name, t in timers.items()
        if not t.warm_up(numbers[name], WARMUP_FRACTION * budget_s / len(timers))
    ]
    numbers = _equal_duration_numbers(timers, numbers)
    times: dict[str, list[float]] = {name: [] for name in timers}
    order = list(timers)
    rng = random.Random(seed)
    rounds, next_check = 0, MIN_ROUNDS
    while True:
        rng.shuffle(order)
        for name in order:
            times[name].append(timers[name].time_block(numbers[name]) / numbers[name])
        rounds += 1
        # At least MIN_SAMPLES_PER_SIDE rounds even past the budget: a verdict needs them.
        out_of_budget = now() - start >= budget_s and rounds >= MIN_SAMPLES_PER_SIDE
        if rounds >= next_check or out_of_budget:
            next_check = max(rounds + 1, math.ceil(rounds * CHECK_GROWTH))
            checks = _estimates(times, baseline, confidence, seed, min_effect, CHECK_RESAMPLES)
            if out_of_budget or all(_rel_halfwidth(e) <= target_rel_ci for e in checks.values()):
                break
    estimates = _estimates(times, baseline, confidence, seed, min_effect, BOOTSTRAP_RESAMPLES)
    if rounds < MIN_ROUNDS:
        warnings.append(f"only {rounds} rounds fit in the {budget_s:g} s budget")
    return Comparison(
        baseline=baseline,
        measurements={
            name: summarize(t, label=name, number_per_sample=numbers[name], confidence=confidence)
            for name, t in times.items()
        },
        estimates=estimates,
        rounds=rounds,
        budget_s=budget_s,
        confidence=confidence,
        warnings=warnings,
    )


def _equal_duration_numbers(timers: Mapping[str, Timer], numbers: dict[str, int]) -> dict[str, int]:
    """Calls per block so that every candidate's block lasts about as long as the longest.

    Why: on a loaded machine a block's chance of being preempted grows with its length, so
    per-call times from 1 ms blocks and from 10 ms blocks differ systematically (measured: up
    to 2x under load 10 on 2 cores for the *same* statement, when power-of-ten sizing picked
    100 calls for one side and 1000 for the other). Equal durations expose all sides alike.
    """
    per_call = {name: t.last_block_s / numbers[name] for name, t in timers.items()}
    if any(p <= 0 for p in per_call.values()):
        return numbers
    target = max(numbers[name] * per_call[name] for name in timers)
    return {name: max(1, round(target / per_call[name])) for name in timers}


def _estimates(
    times: dict[str, list[float]],
    baseline: str,
    confidence: float,
    seed: int,
    min_effect: float,
    resamples: int,
) -> dict[str, RatioEstimate]:
    return {
        name: compare_samples(
            times[baseline],
            t,
            confidence=confidence,
            seed=seed,
            min_effect=min_effect,
            resamples=resamples,
            # Every round times each candidate once, in shuffled order: samples pair by round.
            paired=True,
        )
        for name, t in times.items()
        if name != baseline
    }
