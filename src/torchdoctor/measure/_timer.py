"""`Timer`: time a statement honestly.

The protocol, step by step:

1. Check once, untimed, that the setup and the statement run (a failure is a `MeasureError`
   naming which of the two failed), which is also the first warm-up call.
2. Size the block: run the statement 1, 10, 100, ... times per clock reading until a block
   is long against both the clock's resolution and the cost of reading the clock (the rule of
   torch.utils.benchmark's `_estimate_block_size`), so a 100 ns statement is timed as a block
   of 10^4 calls instead of as clock noise.
3. Warm up until timings settle: compiled code (torch.compile, lazy init, allocator growth)
   is slow for its first calls, so blocks are run until the last few agree.
4. Measure blocks. On a CUDA (or ROCm) device each block is bracketed by CUDA events on the
   current stream and the end event is synchronized before its elapsed time is read;
   elsewhere every host clock read is preceded by a device synchronize, so queued device
   work is inside the block it belongs to (see `_device_timer`).

Clock, synchronize and the whole block timer are injectable, so tests drive the Timer with a
fake clock or a fake CUDA event backend.
"""

from __future__ import annotations

import math
import statistics
import time
import timeit
from collections.abc import Callable, Sequence
from typing import Any, Final

from torchdoctor.core.errors import MeasureError
from torchdoctor.core.vocabulary import Clock
from torchdoctor.measure._device_timer import BlockTimer, make_block_timer
from torchdoctor.measure._measurement import MIN_SAMPLES_FOR_STATS, Measurement, summarize
from torchdoctor.measure._resample import median_ci
from torchdoctor.measure._sync import make_sync

Statement = str | Callable[[], object]

#: Reading the clock may cost at most this fraction of a block (torch.utils.benchmark's
#: `_estimate_block_size` uses the same 1e-4).
MAX_OVERHEAD_FRACTION: Final = 1e-4
#: A block must last at least this fraction of the requested run time (torch uses 1/1000).
MIN_BLOCK_FRACTION_OF_RUN: Final = 1e-3
#: ...and at least this many clock ticks, so quantization error stays below 0.1%.
MIN_BLOCK_TICKS: Final = 1000
#: Never run more calls per block than this (the statement is then effectively free).
MAX_BLOCK_NUMBER: Final = 10**7
#: A clock that shows no time passing over this many calls is frozen (a broken fake clock).
_FROZEN_CLOCK_CALLS: Final = 1000
#: Warm-up has settled when the last `SETTLE_WINDOW` blocks are within `SETTLE_TOLERANCE` of
#: their median. 10% is the same spread torch calls noisy (see IQR_WARN_FRACTION).
SETTLE_WINDOW: Final = 3
SETTLE_TOLERANCE: Final = 0.10
#: Share of the run time (blocked_autorange) or budget (adaptive_autorange) warm-up may use.
WARMUP_FRACTION: Final = 0.25
#: The adaptive loop re-checks its interval each time the sample count grows by this factor,
#: so the bootstrap cost stays a small fraction of the measuring time.
CHECK_GROWTH: Final = 1.25
#: Resamples for those checks: they need the interval's width only roughly.
CHECK_RESAMPLES: Final = 400


def settled(times: Sequence[float]) -> bool:
    """Whether the last `SETTLE_WINDOW` timings are within `SETTLE_TOLERANCE` of their median.

    The one warm-up rule: the Timer's blocks, `torchdoctor run`'s steps and the tuner's arms
    all stop warming up by it.
    """
    if len(times) < SETTLE_WINDOW:
        return False
    recent = times[-SETTLE_WINDOW:]
    mid = statistics.median(recent)
    return mid <= 0 or (max(recent) - min(recent)) <= SETTLE_TOLERANCE * mid


def _describe(stmt: Statement) -> str:
    if isinstance(stmt, str):
        return stmt.strip() or "pass"
    return getattr(stmt, "__qualname__", None) or repr(stmt)


def _error_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Timer:
    """Time `stmt` (a string of Python or a zero-argument callable) after `setup`.

    `globals` is the namespace string statements run in. `device` selects how blocks are
    timed: CUDA events on an available "cuda[:N]" device, else synchronize + host clock (the
    synchronize is a no-op on CPU). `sync` and `clock` replace the synchronize and the clock
    (seconds, monotonic), e.g. with fakes, and select the host-clock protocol; `block_timer`
    replaces the block timing altogether (a fake event timer). `clock` also measures the
    wall-time budget of `adaptive_autorange`.
    """

    def __init__(
        self,
        stmt: Statement,
        setup: Statement = "pass",
        globals: dict[str, Any] | None = None,
        *,
        device: str | None = None,
        clock: Clock | None = None,
        sync: Callable[[], None] | None = None,
        block_timer: BlockTimer | None = None,
        label: str = "",
    ) -> None:
        self._stmt = stmt
        self._setup = setup
        self._globals = dict(globals) if globals is not None else {}
        self._clock = clock or time.perf_counter
        self._sync = sync or make_sync(device)
        self._block_timer = block_timer or make_block_timer(device, clock=clock, sync=sync)
        self._block_open = False
        self.label = label or _describe(stmt)
        for name, code in (("setup", setup), ("statement", stmt)):
            if isinstance(code, str):
                try:
                    compile(code, f"<{name}>", "exec")
                except SyntaxError as exc:
                    raise MeasureError(
                        f"{name} {code!r} is not valid Python: {exc.msg} (line {exc.lineno})"
                    ) from None
            elif not callable(code):
                raise MeasureError(f"{name} must be a string or a callable, got {code!r}")
        try:
            self._raw = timeit.Timer(stmt, setup, timer=self._read_clock, globals=self._globals)
        except (SyntaxError, ValueError) as exc:
            raise MeasureError(f"statement {self.label!r} cannot be timed: {exc}") from None
        self._checked = False
        self.last_block_s = 0.0

    # -- clock and blocks -------------------------------------------------------------------

    def _read_clock(self) -> float:
        # timeit reads its timer exactly twice per block, before the first call and after
        # the last, and returns the difference. The first read starts the block timer and
        # reads as 0; the second stops it and reads as the block's seconds, so the difference
        # is whatever the block timer measured (events on CUDA, synced host clock elsewhere).
        if not self._block_open:
            self._block_open = True
            self._block_timer.start()
            return 0.0
        self._block_open = False
        return self._block_timer.stop()

    def time_block(self, number: int) -> float:
        """Seconds for `number` calls (timeit disables the garbage collector meanwhile)."""
        self._block_open = False
        try:
            return float(self._raw.timeit(number))
        except Exception as exc:
            self._block_open = False
            raise MeasureError(f"statement {self.label!r} raised {_error_line(exc)}") from exc

    def check_runs(self) -> None:
        """Run setup and statement once, untimed, to report which one fails."""
        if self._checked:
            return
        namespace = dict(self._globals)
        for name, code in (("setup", self._setup), ("statement", self._stmt)):
            try:
                if isinstance(code, str):
                    exec(code, namespace)
                else:
                    code()
            except Exception as exc:
                raise MeasureError(
                    f"{name} {_describe(code)!r} raised {_error_line(exc)}",
                    hint="fix it so that it runs once on its own",
                ) from exc
        self._sync()
        self._checked = True

    def clock_resolution(self) -> float:
        """Smallest duration the block timer can tell from zero (0 if its clock is frozen)."""
        return self._block_timer.resolution()

    def estimate_block_size(self, min_run_time: float) -> int:
        """Calls per block: the first power of ten whose block is long enough (see above)."""
        self.check_runs()
        overhead = statistics.median(self.time_block(0) for _ in range(5))
        min_block = max(
            min_run_time * MIN_BLOCK_FRACTION_OF_RUN, MIN_BLOCK_TICKS * self.clock_resolution()
        )
        number = 1
        while number < MAX_BLOCK_NUMBER:
            taken = self.time_block(number)
            if taken >= min_block and overhead <= MAX_OVERHEAD_FRACTION * taken:
                break
            if taken > min_run_time:
                break
            if taken <= 0 and number >= _FROZEN_CLOCK_CALLS:
                raise MeasureError(
                    f"the clock did not advance over {number} calls of {self.label!r}",
                    hint="pass a clock that measures the statement",
                )
            number *= 10
        return number

    def warm_up(self, number: int, max_time: float) -> bool:
        """Run blocks until the last few agree; False if `max_time` ran out first.

        Afterwards `last_block_s` holds the median of the last few blocks (seconds per block).
        """
        recent: list[float] = []
        spent = 0.0
        while True:
            taken = self.time_block(number)
            spent += taken
            recent = [*recent[-(SETTLE_WINDOW - 1) :], taken]
            if len(recent) < SETTLE_WINDOW:
                continue  # judging "settled" needs a full window, whatever the time limit
            self.last_block_s = statistics.median(recent)
            if settled(recent):
                return True
            if spent >= max_time:
                return False

    # -- public measurements ----------------------------------------------------------------

    def timeit(self, number: int = 1_000_000) -> Measurement:
        """One block of `number` calls after a short warm-up (like timeit / torch's timeit)."""
        if number < 1:
            raise MeasureError(f"number {number!r} must be at least 1")
        self.check_runs()
        self.time_block(max(number // 100, 2))
        taken = self.time_block(number)
        return summarize([taken / number], label=self.label, number_per_sample=number)

    def blocked_autorange(self, min_run_time: float = 0.2) -> Measurement:
        """Size the block, warm up, then time blocks until `min_run_time` of timed work."""
        if not min_run_time > 0:
            raise MeasureError(f"min_run_time {min_run_time!r} must be positive")
        number = self.estimate_block_size(min_run_time)
        settled = self.warm_up(number, WARMUP_FRACTION * min_run_time)
        times: list[float] = []
        total = 0.0
        while total < min_run_time:
            taken = self.time_block(number)
            times.append(taken / number)
            total += taken
        result = summarize(times, label=self.label, number_per_sample=number)
        return result if settled else result.with_warnings(_UNSETTLED)

    def adaptive_autorange(
        self,
        target_rel_ci: float = 0.01,
        budget_s: float = 10.0,
        *,
        min_run_time: float = 0.2,
        confidence: float = 0.95,
    ) -> Measurement:
        """Time blocks until the CI of the median is within ±`target_rel_ci` of it, or the
        budget (seconds of wall time, warm-up included) runs out.
        """
        if not target_rel_ci > 0:
            raise MeasureError(f"target_rel_ci {target_rel_ci!r} must be positive")
        if not (budget_s > 0 and math.isfinite(budget_s)):
            raise MeasureError(f"budget {budget_s!r} s must be a positive number of seconds")
        if not 0.0 < confidence < 1.0:
            raise MeasureError(f"confidence {confidence!r} is not between 0 and 1")
        start = self._clock()
        min_run_time = min(min_run_time, budget_s / 2)
        number = self.estimate_block_size(min_run_time)
        settled = self.warm_up(number, WARMUP_FRACTION * budget_s)
        times: list[float] = []
        total = 0.0
        next_check = MIN_SAMPLES_FOR_STATS
        reached = False
        while True:
            taken = self.time_block(number)
            times.append(taken / number)
            total += taken
            out_of_budget = self._clock() - start >= budget_s
            if (len(times) >= next_check and total >= min_run_time) or out_of_budget:
                next_check = max(len(times) + 1, math.ceil(len(times) * CHECK_GROWTH))
                low, high = median_ci(times, confidence=confidence, resamples=CHECK_RESAMPLES)
                mid = statistics.median(times)
                reached = mid > 0 and (high - low) / (2 * mid) <= target_rel_ci
                if out_of_budget or reached:
                    break
        result = summarize(times, label=self.label, number_per_sample=number, confidence=confidence)
        if not reached:
            result = result.with_warnings(
                f"budget of {budget_s:g} s ran out with the CI at ±{result.rel_ci_halfwidth:.1%} "
                f"of the median (target ±{target_rel_ci:.1%})"
            )
        return result if settled else result.with_warnings(_UNSETTLED)

    def __repr__(self) -> str:
        return f"Timer({self.label!r})"


_UNSETTLED: Final = (
    "warm-up did not settle: early blocks still differed by more than "
    f"{SETTLE_TOLERANCE:.0%}; timings may include compilation or caching effects"
)
