"""Finding steps and phases from hook events in code we did not write.

`StepRecorder` is pure bookkeeping: the hooks (see `hooks.py`) tell it when a phase begins
and ends, when an optimizer step finishes and when a backward pass runs; it turns that
stream into `StepTiming` records. It takes its time from a `Clock`, so tests drive it with a
fake clock and CUDA runs can use events instead of host time.

Step boundaries:
- optimizer mode: a step ends when an optimizer step finishes (global post-hook), so gradient
  accumulation (several backwards per update) still counts one step per update;
- backward mode (no torch.optim optimizer exists, parameters updated by hand): a step ends
  when, after a backward pass, the next step begins (a batch fetch or a model forward); the
  last step ends where its last observed phase ended.
Only the outermost phase is timed: a copy inside forward belongs to forward, so the named
phases never overlap and `other = total - sum(named phases)`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from torchdoctor.collect.script_profile import StepDetection
from torchdoctor.core.steps import PHASES, Phase, StepTiming
from torchdoctor.core.tool_syncs import tool_sync_range


class Clock(Protocol):
    """Marks points in time; durations between marks are resolved later (CUDA events)."""

    def mark(self) -> Any: ...

    def seconds(self, start: Any, end: Any) -> float: ...


class HostClock:
    """Host wall clock. On CPU the work happens on the calling thread, so this is exact."""

    def mark(self) -> float:
        return time.perf_counter()

    def ready(self, mark: float) -> bool:
        return True

    def seconds(self, start: float, end: float) -> float:
        return max(0.0, end - start)


@dataclass(frozen=True)
class _EventMark:
    event: Any
    device: Any  # the device whose stream the event was recorded on; None: the current one
    host_s: float


class CudaEventClock:
    """CUDA events on the script's device's stream: phase times as that device saw them.

    No sync inside the steps: mid-run the recorder resolves a step only once `ready` says the
    device has passed its end event (`Event.query`, which waits for nothing), so no wait of
    the tool's lands in the job's steps (on an H200 a wait per step showed up as one of the
    job's syncs in every step of a script's diagnosis). What is still pending when the
    script ends is resolved then, each wait inside torchdoctor's own sync range.

    The device is the one the script's tensors live on, not whichever is current: a DDP
    script that moves its model and batches to `cuda:{LOCAL_RANK}` without set_device leaves
    cuda:0 current, and events recorded there would time GPU 0's (empty) stream. The hooks
    call `use_device` with the destination of the script's host-to-device copies; `device`
    is the first guess. Two marks on different devices (the device was learned between them)
    cannot be compared by events, so that interval falls back to the host clock.
    `cuda` is `torch.cuda` (a fake in tests).
    """

    def __init__(self, device: Any = None, cuda: Any = None) -> None:
        if cuda is None:
            import torch

            cuda = torch.cuda
        self._cuda = cuda
        self.device = device

    def use_device(self, device: Any) -> None:
        self.device = device

    def mark(self) -> _EventMark:
        event = self._cuda.Event(enable_timing=True)
        # An event is recorded on the stream given; without one, on the current device's.
        event.record(self._cuda.current_stream(self.device))
        return _EventMark(event, self.device, time.perf_counter())

    def ready(self, mark: _EventMark) -> bool:
        """Whether the device has passed `mark` (reading it then waits for nothing)."""
        return bool(mark.event.query())

    def seconds(self, start: _EventMark, end: _EventMark) -> float:
        if start.device != end.device:
            return max(0.0, end.host_s - start.host_s)
        if not end.event.query():
            with tool_sync_range():
                end.event.synchronize()
        # elapsed_time is in ms
        return max(0.0, float(start.event.elapsed_time(end.event)) / 1e3)


@dataclass
class _OpenStep:
    start: Any
    intervals: list[tuple[Phase, Any, Any]] = field(default_factory=list)
    samples: int | None = None
    backward_seen: bool = False
    last_end: Any = None
    #: where the latest backward ended: its mark and how many intervals the step had then
    backward_end: Any = None
    backward_end_intervals: int = 0


@dataclass
class _ClosedStep:
    index: int
    start: Any
    end: Any
    intervals: list[tuple[Phase, Any, Any]]
    samples: int | None


class StepRecorder:
    """Turns begin/end/boundary events into `StepTiming` records (see module docstring)."""

    def __init__(
        self, clock: Clock | None = None, on_step_end: Callable[[int], None] | None = None
    ) -> None:
        self.clock: Clock = clock or HostClock()
        self.on_step_end = on_step_end
        self.steps: list[StepTiming] = []
        self.detection: StepDetection = "none"
        #: set once any torch.optim optimizer is constructed: backward calls then no longer
        #: mark steps (they may be accumulation micro-steps), optimizer steps do.
        self.optimizer_exists = False
        self.closed_count = 0
        #: Samples of the step that closed last (the data probe's batch size), None if unseen.
        self.last_samples: int | None = None
        self._open: _OpenStep | None = None
        self._active: Phase | None = None
        self._active_start: Any = None
        self._depth = 0
        self._unresolved: list[_ClosedStep] = []

    @property
    def active_phase(self) -> Phase | None:
        return self._active

    @property
    def open_samples(self) -> int | None:
        """Samples of the step still open (the data probe's batch size), None if unseen."""
        return self._open.samples if self._open is not None else None

    @property
    def in_step(self) -> bool:
        """Whether a step has begun (setup code before the first step is not in one)."""
        return self._open is not None

    def begin(self, phase: Phase) -> None:
        if self._active is not None:
            self._depth += 1  # nested inside an outer phase: the outer one owns the time
            return
        self._maybe_backward_boundary(phase)
        now = self.clock.mark()
        if self._open is None:
            self._open = _OpenStep(start=now)
        self._active = phase
        self._active_start = now

    def end(self, phase: Phase) -> None:
        if self._depth > 0:
            self._depth -= 1
            return
        if self._active is None or self._open is None:
            return  # an end without its begin (hook installed mid-call): ignore
        now = self.clock.mark()
        self._open.intervals.append((self._active, self._active_start, now))
        self._open.last_end = now
        if self._active == "backward":
            self._open.backward_seen = True
            self._open.backward_end = now
            self._open.backward_end_intervals = len(self._open.intervals)
        self._active = None
        self._depth = 0

    def note_samples(self, samples: int | None) -> None:
        if self._open is not None and samples is not None and self._open.samples is None:
            self._open.samples = samples

    def optimizer_step_end(self) -> None:
        """Called by the global optimizer post-hook, after `end("optimizer")`."""
        self.detection = "optimizer_hook"
        self._close(self.clock.mark(), reopen=True)

    def finish(self) -> None:
        """Close the last step if it is a whole one, then resolve every pending interval."""
        if self._active is not None:
            self.end(self._active)
        step = self._open
        if (
            step is not None
            and step.backward_seen
            and self.detection != "optimizer_hook"
            and not self.optimizer_exists
        ):
            self.detection = "backward"
            self._close(step.last_end, reopen=False)
        # In optimizer mode the open tail after the last update (eval, saving) is no step.
        self._open = None
        self._resolve(keep_last=False)

    def _maybe_backward_boundary(self, phase: Phase) -> None:
        step = self._open
        if step is None or not step.backward_seen or self.optimizer_exists:
            return
        if phase in ("data_wait", "forward"):
            self.detection = "backward"
            self._close(self.clock.mark(), reopen=True)
        elif phase == "backward":
            # A second backward with no module forward or batch fetch seen in between (a
            # model of bare tensors): the step ends where the previous backward ended, and
            # what ran after it (the update, the next forward) starts the next step.
            self.detection = "backward"
            tail = step.intervals[step.backward_end_intervals :]
            del step.intervals[step.backward_end_intervals :]
            # What ran after the backward already belongs to the next step: keep its start.
            self._close(step.backward_end, reopen=True, remark=not tail)
            if self._open is not None:
                self._open.intervals.extend(tail)

    def _close(self, end: Any, *, reopen: bool, remark: bool = True) -> None:
        """End the open step at `end`; with `reopen` the next step starts right there, so the
        time between an update and the next batch (schedulers, logging) is counted."""
        step = self._open
        if step is None:
            return
        self._open = _OpenStep(start=end) if reopen else None
        self._active = None
        self._depth = 0
        self._unresolved.append(
            _ClosedStep(self.closed_count, step.start, end, step.intervals, step.samples)
        )
        self.closed_count += 1
        self.last_samples = step.samples
        self._resolve(keep_last=True)
        if self.on_step_end is not None:
            self.on_step_end(self.closed_count)
            # The callback may start or stop the profiler (seconds, and a trace written to
            # disk): that is the instrumentation's time, not the script's, so the next step
            # starts once it returns.
            if remark and self._open is not None and not self._open.intervals:
                self._open.start = self.clock.mark()

    def _resolve(self, *, keep_last: bool) -> None:
        """Turn closed steps into records. Mid-run (`keep_last`), only those the clock reads
        without waiting (`ready`: with CUDA events, steps the device has finished, see
        CudaEventClock); a clock without `ready` resolves one step late. At the end, all."""
        ready = getattr(self.clock, "ready", None)
        keep = 1 if keep_last and ready is None and not isinstance(self.clock, HostClock) else 0
        while len(self._unresolved) > keep:
            if keep_last and ready is not None and not ready(self._unresolved[0].end):
                break
            done = self._unresolved.pop(0)
            phases: dict[Phase, float] = {p: 0.0 for p in PHASES}
            for phase, start, end in done.intervals:
                phases[phase] += self.clock.seconds(start, end)
            total = self.clock.seconds(done.start, done.end)
            named = sum(phases.values())
            total = max(total, named)
            phases["other"] = total - named
            self.steps.append(
                StepTiming(index=done.index, total_s=total, phases=phases, samples=done.samples)
            )
