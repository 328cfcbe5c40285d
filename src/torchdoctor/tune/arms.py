"""An arm: one recipe's live worker, warmed up, and everything measured on it so far.

Measuring a candidate against the current best is interleaved: both arms stay alive (each
prepared once) and run chunks of steps in turn, A B A B ..., so that whatever else the machine
is doing at that moment slows both sides alike. Only steady-state chunks count: warm-up steps
(the first of which carries torch.compile's compilation) and the first `settle_rounds` rounds
are run but not scored.

A chunk's score is seconds per sample (throughput objective) or seconds per step (latency
objective). The statistic and the decision (paired per-round ratios best_i / candidate_i, their
median and its bootstrap interval, Bonferroni-adjusted looks, faster / futile / undecided at a
look) are `torchdoctor.measure.SequentialTest`'s; this module runs the live arms it judges.
Pairing cancels what a round's two chunks share: a load spike from another
process that slows both sides 10x moves an unpaired ratio of medians a lot and a paired ratio
hardly at all: on a busy 2-core host an unpaired 95% interval of a torch.compile trial can
span two orders of magnitude ([0.17, 18]) where the paired one spans a few tens of percent.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Final

from pydantic import Field

from torchdoctor import measure
from torchdoctor.core.load import MachineLoad, combine
from torchdoctor.core.steps import StepTiming
from torchdoctor.core.vocabulary import Clock, Objective
from torchdoctor.measure import (
    CUDA_EVENT_MIN_CHUNK_S,
    MAX_EXTRA_WARMUP_STEPS,
    MIN_CHUNK_S,
    SETTLE_WINDOW,
    LoadProbe,
    PairedSpeedup,
    SequentialTest,
    TimerKind,
    look_confidence,
    sequential_looks,
    settled,
    steady_rate,
)
from torchdoctor.measure import load as load_signal
from torchdoctor.procs import (
    Park,
    Parked,
    Reference,
    Release,
    Run,
    Unpark,
    WorkerLike,
    end_now,
)
from torchdoctor.tune.records import TrialFigures
from torchdoctor.tune.turns import DeviceTurns

#: Seconds the next worker request may take. Called before every request, so that all the
#: requests of a trial share one deadline: a slow candidate cannot run past the budget one
#: request at a time (each within its own timeout, together far beyond it).
Timeout = Callable[[], float]

#: Told each look of a sequential A/B: the estimate so far and the scored rounds.
OnLook = Callable[[PairedSpeedup, int], None]

#: Warm-up steps before anything is scored: the first compiles (torch.compile, cudnn
#: autotuning), the next ones let allocator caches and CPU frequency settle.
DEFAULT_WARMUP_STEPS: Final = 3
#: Steps per chunk: long enough that one chunk's time is not dominated by timer granularity
#: or a single scheduler hiccup, short enough that many chunks fit in a trial.
DEFAULT_CHUNK_STEPS: Final = 4
#: A chunk lasts at least this long (more steps for fast models); one definition with `run`'s
#: chunks (`torchdoctor.measure.MIN_CHUNK_S`, which says why 0.3 s).
DEFAULT_MIN_CHUNK_S: Final = MIN_CHUNK_S
#: A chunk timed by CUDA events lasts at least this long (`measure.CUDA_EVENT_MIN_CHUNK_S`
#: says why 50 ms): the host's 0.3 s floor is the scheduler's noise, which events do not see.
DEFAULT_EVENT_MIN_CHUNK_S: Final = CUDA_EVENT_MIN_CHUNK_S
#: Most scored A/B rounds of one trial (the sequential design's last look). Clear wins and
#: clear losses stop at the first look (6 rounds), so a higher cap costs only the unclear
#: trials. A 5-10% gain needs about this many rounds to clear 1 + min_gain on a 2-core host;
#: with half as many, real gains of that size were left unproven. Every look, taken or not,
#: is in the Bonferroni correction (`looks`), so the longer schedule keeps the false-accept
#: rate at 1 - confidence. Beyond this cap, neither the confidence nor more rounds is a strong
#: lever on a close call: the interval of the median of 24 ratios ends at order statistics
#: near the middle, so lowering the confidence barely moves its lower end, and the spread
#: between chunks, not their number, limits power (`benchmarks/replay_looks.py` replays and
#: resamples a tune's A/Bs to show it). Measurements: benchmarks/RESULTS.md, "The measurement
#: plan" and "Close calls are decided at the last look".
DEFAULT_ROUNDS: Final = 24
#: First look of the sequential design. With the look-adjusted (Bonferroni) confidence the
#: bootstrap interval's lower end at 6 rounds is about the smallest of the 6 ratios, so a
#: do-nothing change clears it only if all 6 ratios do, at most 0.5**6 = 1.6% of the time even
#: with very noisy chunks; fewer rounds would let that first look alone cost the 5% budget.
DEFAULT_MIN_ROUNDS: Final = 6
#: Rounds between two looks of the sequential design (looks at 6, 8, 10, 12 by default).
DEFAULT_LOOK_EVERY: Final = 2
#: Unscored rounds after warm-up, so that both arms are in steady state when scoring starts.
DEFAULT_SETTLE_ROUNDS: Final = 1
#: Steps of the loss trajectory compared for quality parity (K). A trial's arms run
#: warmup + (settle + min_rounds) * chunk = 31 steps by its first look anyway, so 32 costs
#: at most a step more and gives the late-half comparison 16 steps to average batch noise over.
DEFAULT_PARITY_STEPS: Final = 32
#: Times a comparison disturbed by other work on the machine is measured again before its
#: (still disturbed) result is used. Pairing cancels load that hits both arms of a round
#: alike, not load that comes and goes within one, and a disturbed machine also shifts which
#: resource binds; two more tries let a passing disturbance end without tripling a trial's
#: cost on a machine that is busy all along.
DEFAULT_REMEASURES: Final = 2


@dataclass(frozen=True)
class MeasurePlan:
    """How every trial of a study measures: the one declaration of these settings.

    A study's `TuneConfig` holds one (its `plan`, saved in the run folder so `--resume`
    measures the same way); the bounds below are checked when a config is read or built.
    """

    warmup_steps: Annotated[int, Field(ge=1)] = DEFAULT_WARMUP_STEPS
    chunk_steps: Annotated[int, Field(ge=1)] = DEFAULT_CHUNK_STEPS
    min_chunk_s: Annotated[float, Field(ge=0)] = DEFAULT_MIN_CHUNK_S
    #: The floor of a chunk timed by CUDA events, where it is below `min_chunk_s`
    #: (`chunk_floor`); `min_chunk_s` restores the host's floor on a GPU.
    event_min_chunk_s: Annotated[float, Field(ge=0)] = DEFAULT_EVENT_MIN_CHUNK_S
    #: Calibrate each arm's chunks from a window of steady steps after warm-up (their mean
    #: step time, stalls included, and whole stall periods: `measure.calibrate_chunks`);
    #: False takes the chunk length from the last warm-up steps, as before.
    calibrate_steady: bool = True
    rounds: Annotated[int, Field(ge=3)] = DEFAULT_ROUNDS
    min_rounds: Annotated[int, Field(ge=3)] = DEFAULT_MIN_ROUNDS
    look_every: Annotated[int, Field(ge=1)] = DEFAULT_LOOK_EVERY
    settle_rounds: Annotated[int, Field(ge=0)] = DEFAULT_SETTLE_ROUNDS
    parity_steps: Annotated[int, Field(ge=2)] = DEFAULT_PARITY_STEPS
    confidence: Annotated[float, Field(gt=0, lt=1)] = 0.95
    remeasures: Annotated[int, Field(ge=0)] = DEFAULT_REMEASURES

    def chunk_floor(self, timer: TimerKind) -> float:
        """Least seconds of a chunk timed by `timer`: `min_chunk_s` on the host's clock, the
        smaller of it and `event_min_chunk_s` on CUDA events (0 when `min_chunk_s` is 0)."""
        if timer == "cuda_event":
            return min(self.min_chunk_s, self.event_min_chunk_s)
        return self.min_chunk_s

    def looks(self) -> list[int]:
        """Scored-round counts at which the sequential A/B looks (`measure.sequential_looks`)."""
        return sequential_looks(
            min_rounds=self.min_rounds, rounds=self.rounds, look_every=self.look_every
        )

    def look_confidence(self, *, last: bool = False) -> float:
        """A look's confidence, weighted Bonferroni over the looks (`measure.look_confidence`)."""
        return look_confidence(self.confidence, len(self.looks()), last=last)

    def sequential(self, threshold: float) -> SequentialTest:
        """The sequential A/B this plan runs, keeping a candidate above `threshold`."""
        return SequentialTest(
            threshold=threshold,
            confidence=self.confidence,
            rounds=self.rounds,
            min_rounds=self.min_rounds,
            look_every=self.look_every,
        )


@dataclass
class Arm:
    """A live worker for one recipe and what it has measured."""

    recipe: dict[str, object]
    worker: WorkerLike
    objective: Objective
    prepare_s: float = 0.0
    compile_s: float = 0.0
    warmup_s: float = 0.0
    losses: list[float | None] = field(default_factory=list)
    chunk_scores: list[float] = field(default_factory=list)
    samples_per_step: float = 0.0
    peak_memory_bytes: int | None = None
    #: The peak memory of each steady request (chunk) in order, warm-up's left out: a per-step
    #: peak once the steps are steady, and its spread over chunks (`tune.fit_decisions`).
    chunk_peaks: list[int] = field(default_factory=list)
    chunk_steps: int = DEFAULT_CHUNK_STEPS
    #: Score (s/sample or s/step) of the first warm-up step after the compiling one, or the
    #: faster of the first two when the first is past give_up_above (None with one warm-up
    #: step): a first look at the arm's speed, before anything is scored.
    warm_score: float | None = None
    #: Seconds per step the chunk length is calibrated from: the mean over the steady
    #: calibration window (stalls included), or the last warm-up steps without one
    step_s: float = 0.0
    #: How this arm's steps are timed (`measure.TimerKind`): CUDA events for a workload on a
    #: GPU, the host clock elsewhere; it sets the chunk's floor (`MeasurePlan.chunk_floor`)
    timer: TimerKind = "host"
    #: Steps between stalls that recur (an epoch restart), seen in the calibration window;
    #: every chunk, and every steady score, is a whole number of them (None: none seen)
    period: int | None = None
    #: Whether the worker returns its cached device memory after each chunk (CUDA): the
    #: other arm runs next on the same GPU (see torchdoctor.procs._worker.release_device_memory).
    #: The first step after a release refills the caching allocator (cudaMalloc, which
    #: synchronizes) where a CUDA graph's private pool, which empty_cache leaves alone, does
    #: not: scoring that step would charge eager arms a cost graph arms are spared, a bias
    #: of the size of the smallest gain the ladder keeps. So a released arm's chunk is scored
    #: without its first step, whatever the arm (`scored_rows`); the step still trains and its
    #: loss counts. Warm-up steps run back to back on one arm and release only once, at the end.
    release_after_run: bool = False
    #: knob -> why it did not act, for a script arm whose recipe was injected
    #: (tune/sources.py); empty for a workload, where every knob acts
    not_applied: dict[str, str] = field(default_factory=dict)
    #: knob -> the value a script runs with of its own (its DataLoader's num_workers, ...),
    #: read at its ready boundary; empty for a workload, whose defaults are known ahead
    own_settings: dict[str, object] = field(default_factory=dict)
    #: The GPU's turns this arm takes before it runs (tune/turns.py): the idle arm is parked
    #: off the device. None on a CPU, where nothing is parked.
    turns: DeviceTurns | None = None
    #: Seconds spent parking and unparking this arm (requests of their own, in no step's
    #: time), how many times, and the bytes its last park moved to the host
    switch_s: float = 0.0
    switches: int = 0
    parked_bytes: int = 0
    #: Told the seconds this arm's close took on `close_clock` (the process's exit, its
    #: tree's): a part of the budget's estimates (`tune.cost`), set with the study's clock by
    #: the arms a study opens (`LiveArms.open`)
    on_close: Callable[[float], None] | None = field(default=None, repr=False, compare=False)
    close_clock: Clock = field(default=time.perf_counter, repr=False, compare=False)

    def hold_device(self, timeout: Timeout) -> None:
        """Take the GPU's turn (tune/turns.py) before running steps; a no-op on a CPU."""
        if self.turns is not None:
            self.turns.take(self, timeout=timeout)

    def switch(self, *, park: bool, timeout: Timeout) -> Parked:
        """Park this arm's worker off the GPU or bring it back (tune/turns.py): a request of
        its own, timed here, so its cost is counted apart from every step."""
        start = time.perf_counter()
        reply = self.worker.request(Park() if park else Unpark(), timeout_s=timeout())
        self.switch_s += time.perf_counter() - start
        self.switches += 1
        if park:
            self.parked_bytes = reply.moved_bytes
        return reply

    def scored_rows(self, rows: list[StepTiming]) -> list[StepTiming]:
        """The steps of one chunk that are scored (`release_after_run`: not the first)."""
        return rows[1:] if self.release_after_run and len(rows) > 1 else rows

    def run(
        self, steps: int, *, timeout: Timeout, release: bool | None = None, warm_up: bool = False
    ) -> float:
        """Run `steps` steps; record losses; return the chunk's score (s/sample or s/step)."""
        rows = self.scored_rows(
            self.steps(steps, timeout=timeout, release=release, warm_up=warm_up)
        )
        total = sum(s.total_s for s in rows)
        if self.objective == "latency":
            return total / max(len(rows), 1)
        return total / max(sum(s.samples or 1 for s in rows), 1)

    def steady_score(self, rows: list[StepTiming]) -> float:
        """Score steady steps as `torchdoctor run` does.

        Throughput: seconds per sample at `measure.steady_rate` (the median over chunks of at
        least the timer's floor, 0.3 s on the host's clock, each a whole number of the arm's
        stall periods); latency: the median step time. The final confirmation scores each
        fresh process this way, so that a user's `torchdoctor run` of a recipe times the
        same window by the same rule.
        """
        if self.objective == "latency":
            return statistics.median(s.total_s for s in rows)
        rate = steady_rate(rows, period=self.period, floor_s=measure.min_chunk_s(self.timer))
        return 1.0 / rate if rate > 0 else math.inf

    def steps(
        self, steps: int, *, timeout: Timeout, release: bool | None = None, warm_up: bool = False
    ) -> list[StepTiming]:
        """One request for `steps` steps: their timings, with losses and peak memory kept;
        `release` (default `release_after_run`) hands cached device memory back after them.
        A warm-up request's peak is not the arm's: autotuning and cuDNN's benchmark mode try
        algorithms with scratch buffers the steady steps never need."""
        release = self.release_after_run if release is None else release
        self.hold_device(timeout)
        reply = self.worker.request(Run(steps, release), timeout_s=timeout())
        rows = [
            StepTiming(
                index=i,
                total_s=float(r[0]),
                samples=int(r[1]) if r[1] is not None else 1,
                loss=r[2],
            )
            for i, r in enumerate(reply.steps)
        ]
        self.samples_per_step = sum(s.samples or 1 for s in rows) / max(len(rows), 1)
        self.losses.extend(s.loss for s in rows)
        peak = reply.peak_memory_bytes
        if peak is not None and not warm_up:
            self.peak_memory_bytes = max(self.peak_memory_bytes or 0, int(peak))
            self.chunk_peaks.append(int(peak))
        return rows

    def warm_up(
        self, plan: MeasurePlan, *, timeout: Timeout, give_up_above: float | None = None
    ) -> None:
        """Run the warm-up steps and calibrate the chunk length from them.

        With `give_up_above` (a score), warm-up stops after the first post-compile steps when
        the faster of the first two exceeds it: the caller rejects such an arm without scoring
        it.
        """
        self._warm_up(plan, timeout=timeout, give_up_above=give_up_above)
        if self.release_after_run:  # the other arm runs next (see release_after_run)
            self.worker.request(Release(), timeout_s=timeout())

    def _warm_up(self, plan: MeasurePlan, *, timeout: Timeout, give_up_above: float | None) -> None:
        self.hold_device(timeout)
        first = self.worker.request(Run(1, False), timeout_s=timeout())
        self.compile_s = float(first.steps[0][0])
        self.losses.append(first.steps[0][2])
        self.warmup_s = self.compile_s
        step_s = self.compile_s
        if plan.warmup_steps > 1:
            score = self.run(1, timeout=timeout, release=False, warm_up=True)
            self.warmup_s += score * _scale(self, 1)
            recent = [score]
            if give_up_above is not None and score > give_up_above:
                # One more step before giving up: a one-time recompile can land on this one
                # (in a script, the collector's global forward hooks giving way to hooks on
                # the model after a few steps changes what a compiled module guards on).
                recent.append(self._warm_step(timeout))
            self.warm_score = min(recent)
            if give_up_above is not None and self.warm_score > give_up_above:
                return
            # The rest of warm-up step by step, then on until step times settle: the same
            # rule as `torchdoctor run` (`torchdoctor.measure.warm_up`), so both measure the
            # same steady state of a recipe.
            while len(recent) < plan.warmup_steps - 1:
                recent.append(self._warm_step(timeout))
            for _ in range(MAX_EXTRA_WARMUP_STEPS):
                if settled(recent):
                    break
                recent.append(self._warm_step(timeout))
            step_s = statistics.median(recent[-SETTLE_WINDOW:]) * _scale(self, 1)
        self._calibrate(plan, step_s, timeout)

    def _calibrate(self, plan: MeasurePlan, warm_step_s: float, timeout: Timeout) -> None:
        """Set the chunk length: from a window of steady steps (`measure.calibrate_chunks`),
        or from the last (post-compile) warm-up steps without one (`calibrate_steady` off, or
        a plan without a floor, whose chunks are `plan.chunk_steps`)."""
        floor = plan.chunk_floor(self.timer)
        self.step_s = warm_step_s
        if not plan.calibrate_steady or floor <= 0:
            self.chunk_steps = measure.chunk_steps(
                warm_step_s, least=plan.chunk_steps, min_chunk_s=floor
            )
            return
        rows = self.steps(
            measure.calibration_steps(warm_step_s, self.timer, floor_s=floor),
            timeout=timeout,
            release=False,
            warm_up=True,
        )
        times = [r.total_s for r in rows]
        # A stall seen without its period yet (an epoch longer than the window): on a GPU the
        # window runs on until the period shows (`measure.more_calibration_steps`).
        while more := measure.more_calibration_steps(times, self.timer):
            extra = self.steps(more, timeout=timeout, release=False, warm_up=True)
            times += [r.total_s for r in extra]
        self.warmup_s += sum(times)
        # A released arm's first step of each chunk is not scored (`scored_rows`): the scored
        # steps are the whole periods.
        calibrated = measure.calibrate_chunks(
            times,
            least=plan.chunk_steps,
            floor_s=floor,
            dropped=1 if self.release_after_run else 0,
        )
        self.step_s = calibrated.step_s
        self.chunk_steps = calibrated.steps
        self.period = calibrated.period

    def reference_losses(
        self, perturbation: int, steps: int, *, timeout: Timeout
    ) -> list[float | None]:
        """The loss trajectory of this arm's recipe with a no-op weight perturbation.

        Run by the worker in a fresh session beside the live one (`torchdoctor.procs`),
        which it leaves as it was. On a GPU the live arm is parked first, so the reference
        never shares the device with it (tune/turns.py).
        """
        if self.turns is not None:
            self.turns.clear(timeout=timeout)
        reply = self.worker.request(Reference(perturbation, steps), timeout_s=timeout())
        return list(reply.losses)

    def _warm_step(self, timeout: Timeout) -> float:
        """One more warm-up step: its score, its seconds added to the warm-up total."""
        score = self.run(1, timeout=timeout, release=False, warm_up=True)
        self.warmup_s += score * _scale(self, 1)
        return score

    def fill_losses(self, steps: int, *, timeout: Timeout) -> None:
        """Run unscored steps until the loss trajectory has `steps` entries (for parity)."""
        missing = steps - len(self.losses)
        if missing > 0:
            self.run(missing, timeout=timeout)

    def rate_of(self, score: float) -> float:
        """Samples per second from a chunk score (s/sample, or s/step for latency)."""
        return self.samples_per_step / score if self.objective == "latency" else 1.0 / score

    def rate(self) -> float:
        """Samples per second at the median of the scored chunks."""
        return self.rate_of(statistics.median(self.chunk_scores))

    def per_step(self) -> float:
        """Units of a chunk score per step: 1 (latency, s/step) or samples per step."""
        return 1.0 if self.objective == "latency" else self.samples_per_step

    def figures(self, losses: list[float | None]) -> TrialFigures:
        """What this arm measured of its recipe as a trial's figures: its memory, `losses`
        (its trajectory cut to the parity steps), its start-up and its chunks; the caller
        adds what the comparison measured (`dataclasses.replace`)."""
        return TrialFigures(
            peak_memory_bytes=self.peak_memory_bytes,
            chunk_peak_memory_bytes=list(self.chunk_peaks),
            losses=losses,
            compile_s=self.compile_s,
            warmup_s=self.warmup_s,
            chunk_times_s=list(self.chunk_scores),
        )

    def close(self, *, at_once: bool = False) -> None:
        """End this arm's worker; `at_once` ends its process tree now rather than letting its
        session close and waiting for it (an arm the trial no longer needs, whose successor
        is about to start: `procs.end_now`)."""
        if self.turns is not None:
            self.turns.forget(self)
        began = self.close_clock()
        if at_once:
            end_now(self.worker)
        else:
            self.worker.close()
        if self.on_close is not None:
            self.on_close(self.close_clock() - began)


def _scale(arm: Arm, steps: int) -> float:
    # Convert a chunk score back to seconds for the warm-up total.
    return steps if arm.objective == "latency" else steps * arm.samples_per_step


def warm_arm(
    arm: Arm, plan: MeasurePlan, *, timeout: Timeout, give_up_above: float | None = None
) -> Arm:
    """Warm up an arm over an already prepared worker (a built-in session or a live script,
    `torchdoctor.procs.ScriptWorker`); closes it and re-raises if warm-up fails."""
    try:
        arm.warm_up(plan, timeout=timeout, give_up_above=give_up_above)
    except BaseException:
        arm.close()
        raise
    return arm


def interleave(best: Arm, candidate: Arm, plan: MeasurePlan, *, timeout: Timeout) -> None:
    """Alternate chunks best, candidate, best, ...; scores after the settle rounds are kept."""
    best.chunk_scores.clear()
    candidate.chunk_scores.clear()
    for i in range(plan.settle_rounds + plan.rounds):
        # Alternate who goes first, so a slow drift within a round favours neither side.
        order = (best, candidate) if i % 2 == 0 else (candidate, best)
        for arm in order:
            score = arm.run(arm.chunk_steps, timeout=timeout)
            if i >= plan.settle_rounds:
                arm.chunk_scores.append(score)


def interleave_until_clear(
    best: Arm,
    candidate: Arm,
    plan: MeasurePlan,
    *,
    threshold: float,
    timeout: Timeout,
    load: LoadProbe | None = None,
    on_look: OnLook | None = None,
) -> PairedSpeedup:
    """Sequential interleaved A/B, measured again while the machine was disturbed.

    `on_look`, if given, is called at each look with the estimate so far and the scored
    rounds (a live terminal's "A/B so far").

    Each round's load is read (`load`, by default `measure.load.default_load_probe()`); a
    comparison in which any round was disturbed by other work is run again from scratch, up to
    `plan.remeasures` times. The returned estimate is the last comparison's, with its load
    and how many comparisons were discarded.
    """
    probe = load or load_signal.default_load_probe()
    remeasured = 0
    while True:
        est, readings = _interleave_once(best, candidate, plan, threshold, timeout, probe, on_look)
        total = combine(readings)
        if total is None or not total.disturbed or remeasured >= plan.remeasures:
            return replace(est, load=total, remeasured=remeasured)
        remeasured += 1


#: Opens a live, warmed-up arm of a recipe under a tag (`LiveArms.open`).
OpenArm = Callable[[dict[str, Any], str], Arm]

#: What the second pair of fresh processes must show of a win its first pair proved
#: (`interleave_fresh_pair`, `Replicates.second_pair`): that a new pair points the same way, its
#: interval above no change (`REPLICATE_THRESHOLD`) at `REPLICATE_CONFIDENCE`, two-sided
#: (90% one-sided; after the weighted split of the looks, the last look is a 90% interval).
#:
#: The first pair proves the size of the win: its interval clears 1 + min_gain at 95%. The
#: second pair is there for what the first cannot see, two processes of one recipe that
#: differ by themselves, and a do-nothing change kept must pass both, in independent draws:
#: p1 x p2. The first pair's own do-nothing rate p1 is a few percent on a 2-core host
#: (`benchmarks/bench_script_noop.py` measures it); the second pair's p2 is 10% by design,
#: and no more than that once the candidate's process starts first (`interleave_fresh_pair`),
#: so the ladder keeps a do-nothing change at a fraction of p1. Holding the second pair to the
#: first's full bar instead squares the power: a real gain of about 10% on a dispatch-bound
#: workload clears that bar only some of the time, and held to it twice it was kept in none
#: of three tunes. Measured rates: benchmarks/RESULTS.md, "A win is proven twice".
REPLICATE_CONFIDENCE: Final = 0.80
#: The bar of the second pair (`REPLICATE_CONFIDENCE`): no change. The first pair has
#: already cleared 1 + min_gain; the second checks the direction.
REPLICATE_THRESHOLD: Final = 1.0
#: How sure the ladder must be that the spread between processes could not have made a win
#: before it keeps the win without a second pair (`measure.second_pair_needed`): the second
#: pair's own one-sided confidence (`REPLICATE_CONFIDENCE` two-sided is 90% one-sided), so
#: that skipping it is no less sure than running it.
SPREAD_CONFIDENCE: Final = 1.0 - (1.0 - REPLICATE_CONFIDENCE) / 2


def replicate_plan(plan: MeasurePlan) -> MeasurePlan:
    """The second pair's sequential A/B: `plan`'s schedule at `REPLICATE_CONFIDENCE`."""
    return replace(plan, confidence=REPLICATE_CONFIDENCE)


def interleave_fresh_pair(
    open_arm: OpenArm,
    best_recipe: dict[str, Any],
    candidate_recipe: dict[str, Any],
    plan: MeasurePlan,
    *,
    timeout: Timeout,
) -> tuple[PairedSpeedup, Arm, Arm]:
    """`interleave_until_clear` on a new process of each recipe: (estimate, best, candidate).

    The check a ladder win must pass a second time (`Replicates.second_pair`): two live processes
    of one recipe can differ by a few percent, steadily, and a fresh pair draws that
    difference afresh. The A/B is `replicate_plan(plan)`'s against `REPLICATE_THRESHOLD`:
    a win holds when `SpeedCheck(estimate, REPLICATE_THRESHOLD).faster`. On a failure the
    arms it opened are closed and the failure raised.

    The candidate's process starts first, so whatever the later start gains counts against
    the change rather than for it: over fresh pairs of one recipe the process started second
    tends to read slightly faster than the first, which against a bar of no change would
    count (`benchmarks/bench_script_noop.py --second-pair-always` measures it;
    benchmarks/RESULTS.md, "A win is proven twice").
    """
    candidate = open_arm(candidate_recipe, "candidate-again")
    try:
        best = open_arm(best_recipe, "best-again")
    except BaseException:
        candidate.close()
        raise
    try:
        est = interleave_until_clear(
            best, candidate, replicate_plan(plan), threshold=REPLICATE_THRESHOLD, timeout=timeout
        )
    except BaseException:
        best.close()
        candidate.close()
        raise
    return est, best, candidate


def _interleave_once(
    best: Arm,
    candidate: Arm,
    plan: MeasurePlan,
    threshold: float,
    timeout: Timeout,
    probe: LoadProbe,
    on_look: OnLook | None = None,
) -> tuple[PairedSpeedup, list[MachineLoad]]:
    """One sequential A/B: stop at the first look where the decision is clear.

    The looks and the decision at each are `measure.SequentialTest`'s (`plan.sequential`).
    Returns the last estimate and the load of every scored round.
    """
    best.chunk_scores.clear()
    candidate.chunk_scores.clear()
    test = plan.sequential(threshold)
    readings: list[MachineLoad] = []
    i = 0
    while True:
        # Alternate who goes first, so a slow drift within a round favours neither side.
        order = (best, candidate) if i % 2 == 0 else (candidate, best)
        window = probe.start()
        for arm in order:
            score = arm.run(arm.chunk_steps, timeout=timeout)
            if i >= plan.settle_rounds:
                arm.chunk_scores.append(score)
        round_load = window.stop()
        if i >= plan.settle_rounds:
            readings.append(round_load)
        i += 1
        look = test.look(best.chunk_scores, candidate.chunk_scores)
        if look is not None and on_look is not None:
            on_look(look.estimate, len(candidate.chunk_scores))
        if look is not None and look.stop:
            return look.estimate, readings


def interleave_steady(
    arms: tuple[Arm, Arm], steps: int, *, timeout: Timeout
) -> tuple[float, float]:
    """Both arms' steady scores (`Arm.steady_score`) over at least `steps` steps each, run in
    alternating chunks of each arm's calibrated length (A B B A ...).

    The confirmation's fresh processes are timed this way rather than one after the other:
    a 2-core cloud host drifts by tens of percent over seconds, which lands on one side of a
    pair timed in sequence and on both sides of a pair timed in turns (benchmarks/RESULTS.md,
    "One decision, one reader, one place").
    """
    rows: tuple[list[StepTiming], list[StepTiming]] = ([], [])
    rounds = max(math.ceil(steps / max(arm.chunk_steps, 1)) for arm in arms)
    for i in range(rounds):
        for k in (0, 1) if i % 2 == 0 else (1, 0):
            chunk = arms[k].steps(arms[k].chunk_steps, timeout=timeout)
            rows[k].extend(arms[k].scored_rows(chunk))
    return arms[0].steady_score(rows[0]), arms[1].steady_score(rows[1])


def measure_alone(arm: Arm, plan: MeasurePlan, *, timeout: Timeout) -> None:
    """Score one arm on its own (the baseline's first figures, joint-search trials)."""
    arm.chunk_scores.clear()
    for i in range(plan.settle_rounds + min(plan.min_rounds, plan.rounds)):
        score = arm.run(arm.chunk_steps, timeout=timeout)
        if i >= plan.settle_rounds:
            arm.chunk_scores.append(score)


def paired_speedup(best: Arm, candidate: Arm, *, confidence: float) -> PairedSpeedup:
    """`measure.paired_speedup` of two arms' scored chunks (> 1: candidate faster).

    Kept for benchmarks/bench_tune_vs_grid.py, which compares arms it drives itself.
    """
    return measure.paired_speedup(best.chunk_scores, candidate.chunk_scores, confidence=confidence)
