"""Arms whose time is a device's: a fake clock moved by what a real device charges.

A trial's wall time on a GPU is mostly process starts (CUDA context, kernels loaded: about 10 s
on an H200) and little steady work (a step of a few milliseconds); on a 2-core CPU the reverse.
`DeviceCostArms` opens simulated sessions in this process (tests/sim_session.py) and moves a
`FakeClock` by those costs: `start_s` per arm opened, `close_s` per arm ended, and each
request's simulated step times (a reference run: its steps at the model's step time). A request
longer than its timeout is cut there, as a worker's deadline cuts it. The costs are the test's
inputs (read from a device's records), not a rule of the budget under test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakes import FakeClock
from torchdoctor.measure import TimerKind
from torchdoctor.procs import (
    FailureKind,
    Ran,
    Reference,
    ReplyT,
    Request,
    SessionSpec,
    WorkerFailure,
)
from torchdoctor.tune.arms import Arm, MeasurePlan, Timeout
from torchdoctor.tune.sources import ArmSource, WorkloadArms
from torchdoctor.tune.turns import DeviceTurns
from tune_sim import SIMULATED_FACTORY


class _TimedWorker:
    def __init__(self, inner: Any, clock: FakeClock, step_s: float, close_s: float = 0.0) -> None:
        self.inner = inner
        self.clock = clock
        self.step_s = step_s
        self.close_s = close_s
        self.peak_rss_bytes = 0

    def request(self, message: Request[ReplyT], *, timeout_s: float) -> ReplyT:
        reply = self.inner.request(message, timeout_s=timeout_s)
        if isinstance(reply, Ran):
            took = sum(row[0] for row in reply.steps)
        elif isinstance(message, Reference):
            took = message.steps * self.step_s
        else:
            took = 0.0
        self._charge(took, timeout_s)
        return reply

    def _charge(self, seconds: float, timeout_s: float) -> None:
        if seconds > timeout_s:
            self.clock.advance(timeout_s)
            raise WorkerFailure(FailureKind.TIMEOUT, f"no answer within {timeout_s:.0f} s")
        self.clock.advance(seconds)

    def close(self) -> None:
        self.inner.close()
        self.clock.advance(self.close_s)


class DeviceCostArms(ArmSource):
    """Simulated arms (`effects` as tests/sim_session.py models them) at a device's costs."""

    def __init__(
        self,
        clock: FakeClock,
        plan: MeasurePlan,
        *,
        start_s: float,
        step_s: float,
        effects: dict[str, dict[str, float]],
        log: Path | None = None,
        timer: TimerKind = "cuda_event",
        close_s: float = 0.0,
    ) -> None:
        options: dict[str, Any] = {
            "base_step_s": step_s,
            "noise": 0.02,
            "base_batch": 32,
            "effects": effects,
        }
        if log is not None:
            options["log_path"] = str(log)
        spec = SessionSpec("sim", {}, factory=SIMULATED_FACTORY, options=options)
        self.inner = WorkloadArms(spec, plan, "throughput", isolate=False)
        self.plan = plan
        self.turns = DeviceTurns()
        self.clock = clock
        self.start_s = start_s
        self.step_s = step_s
        self.close_s = close_s
        self.timer: TimerKind = timer

    def prepare(self, recipe: dict[str, Any], *, timeout: Timeout, log_path: Path | None) -> Arm:
        arm = self.inner.prepare(recipe, timeout=timeout, log_path=log_path)
        worker = _TimedWorker(arm.worker, self.clock, self.step_s, self.close_s)
        try:
            worker._charge(self.start_s, timeout())
        except WorkerFailure:
            worker.close()
            raise
        arm.worker = worker
        # A GPU arm's steps are timed by CUDA events (tune/sources.py), whose chunks may be
        # shorter than the host clock's (measure/_chunks.py).
        arm.timer = self.timer
        return arm
