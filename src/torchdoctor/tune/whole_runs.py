"""An A/B in turns: whole runs of two recipes, one process on the device at a time.

Where two processes of a job do not fit on the GPU at once, even with the idle one parked
(`tune.turns.decide_sharing`: a plain tensor, a frozen base model, a graph pool stays), the
interleaved A/B of two live arms cannot run. Each recipe is then run whole instead: a fresh
process is started, warmed up, timed and ended before the next one starts, in ABBA order
(candidate, best, best, candidate, candidate, best, ...). A pair of adjacent runs is the unit
of the comparison: its ratio of scores is one observation, as a fresh process pair is in the
final confirmation (tune/confirm.py), and the speedup and its interval come from the pairs'
ratios (`measure.replicated_speedup`, Student's t on their logs). The ABBA order puts a slow
drift of the host or the device (clocks, temperature) on both sides alike, and the candidate
starts first, so whatever a later start gains counts against the change.

Whole runs cost a process start each (about 10 s on a GPU), so fewer pairs fit than chunks
of two live arms; but each pair is two fresh processes, so the interval covers how much one
process differs from another, which the chunks of one live pair cannot show
(`arms.REPLICATE_CONFIDENCE` says why a ladder win is otherwise measured a second time).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from torchdoctor.core.steps import StepTiming
from torchdoctor.measure import DEFAULT_REPLICATES, MIN_REPLICATES, PairedSpeedup
from torchdoctor.measure import replicated_speedup as _replicated_speedup
from torchdoctor.tune.arms import Arm, Timeout

__all__ = ["TURN_PAIRS", "RunsInTurns", "run_in_turns", "steady_alone"]

#: Pairs of whole runs of a ladder trial in turns: `measure.DEFAULT_REPLICATES` (Student's t
#: at 95% falls from 4.30 with 3 pairs to 3.18 with 4), never fewer than
#: `measure.MIN_REPLICATES`, the fewest that give an interval.
TURN_PAIRS: Final = max(DEFAULT_REPLICATES, MIN_REPLICATES)

#: The two sides of an A/B in turns.
SIDES: Final = ("candidate", "best")

S = TypeVar("S")


@dataclass
class RunsInTurns(Generic[S]):
    """What the whole runs of an A/B measured, side by side ("best", "candidate")."""

    #: each run's score (seconds per sample, or per step), in the order run, per side
    scores: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES})
    #: each run's rate (samples per second) and seconds per step
    rates: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES})
    step_s: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES})
    #: the highest steady peak of each side's runs (None: not reported)
    peaks: dict[str, int | None] = field(default_factory=lambda: {s: None for s in SIDES})
    #: the candidate's first run: its losses, compile and warm-up seconds
    losses: list[float | None] = field(default_factory=list)
    compile_s: float = 0.0
    warmup_s: float = 0.0
    #: what `stop` said of the candidate's first run (None: the runs went on)
    stopped: S | None = None

    @property
    def pairs(self) -> int:
        return min(len(v) for v in self.scores.values())

    def estimate(self, *, confidence: float) -> PairedSpeedup:
        """The candidate's speedup over the best from the pairs' ratios (> 1: faster)."""
        n = self.pairs
        return _replicated_speedup(
            self.scores["best"][:n], self.scores["candidate"][:n], confidence=confidence
        )

    def rate(self, side: str) -> float:
        return statistics.median(self.rates[side])


def run_in_turns(
    open_arm: Callable[[str], Arm],
    time_run: Callable[[Arm], float],
    *,
    pairs: int,
    stop: Callable[[Arm], S | None] = lambda arm: None,
    losses: Callable[[Arm], None] = lambda arm: None,
) -> RunsInTurns[S]:
    """`pairs` pairs of whole runs in ABBA order, the candidate first (module docstring).

    `open_arm(side)` starts and warms up a fresh process of that side's recipe;
    `time_run(arm)` times it and returns its score; `losses(arm)` completes the candidate's
    first run's loss trajectory (the quality check's) before it ends; `stop(arm)`, given the
    candidate's first run before it is timed, may end the A/B there with a verdict of its
    own (a change that does not apply). Every run's process is ended before the next one
    starts. A failure (`WorkerFailure`) is raised as it came, its process ended.
    """
    runs: RunsInTurns[S] = RunsInTurns()
    order = [side for i in range(pairs) for side in (SIDES if i % 2 == 0 else SIDES[::-1])]
    first = True
    for side in order:
        arm = open_arm(side)
        try:
            if side == "candidate" and first:
                runs.stopped = stop(arm)
                if runs.stopped is not None:
                    return runs
            score = time_run(arm)
            if side == "candidate" and first:
                losses(arm)
                runs.losses = list(arm.losses)
                runs.compile_s, runs.warmup_s = arm.compile_s, arm.warmup_s
                first = False
        finally:
            arm.close()
        runs.scores[side].append(score)
        runs.rates[side].append(arm.rate_of(score))
        runs.step_s[side].append(score * arm.per_step())
        if arm.peak_memory_bytes is not None:
            runs.peaks[side] = max(runs.peaks[side] or 0, arm.peak_memory_bytes)
    return runs


def steady_alone(arm: Arm, steps: int, *, timeout: Timeout) -> float:
    """`arm`'s steady score (`Arm.steady_score`) over at least `steps` steps run alone, in
    chunks of its calibrated length (the final confirmation's process, in turns)."""
    rows: list[StepTiming] = []
    while len(rows) < steps:
        rows.extend(arm.scored_rows(arm.steps(arm.chunk_steps, timeout=timeout)))
    return arm.steady_score(rows)
