"""`Recording`: the zero-code launcher's probes in this process, from a trainer's first step to
its last, then the run folder `torchdoctor diagnose -- python train.py` would leave.

The probes patch torch's classes (the optimizer's step hooks, the DataLoader iterator, module
forward hooks), so installing them when training starts sees the model, optimizer and loaders a
trainer built before. The steps are the optimizer's steps, as for a script; the profiled window
(warm-up steps, then profiled steps) is the launcher's, and so is the diagnosis: the same
record, the same rules, the same ceilings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from torchdoctor.collect import CollectConfig, Instrumentation
from torchdoctor.core import rundir
from torchdoctor.core.log import get_logger

if TYPE_CHECKING:
    from torchdoctor.diagnose import Diagnosis

log = get_logger(__name__)

#: The launcher's defaults (`torchdoctor diagnose --warmup 5 --profile-steps 5`), so a callback's
#: diagnosis reads the same window as `diagnose -- python` on the same script.
DEFAULT_WARMUP = 5
DEFAULT_PROFILE_STEPS = 5
TRACE_SUBDIR = "collect"


class Recording:
    """Start when training starts, `finish()` when it ends; the run folder is `run_dir`.

    `out`: the run folder to write (default: a new one under torchdoctor-runs/). `report`:
    also write report.html and report.md. Nothing is written before `start()`.
    """

    def __init__(
        self,
        target: str,
        *,
        out: str | Path | None = None,
        warmup: int = DEFAULT_WARMUP,
        profile_steps: int = DEFAULT_PROFILE_STEPS,
        report: bool = True,
    ) -> None:
        self.target = target
        self.out = Path(out) if out is not None else None
        self.warmup = warmup
        self.profile_steps = profile_steps
        self.report = report
        self.run_dir: Path | None = None
        self.diagnosis: Diagnosis | None = None
        self._instrumentation: Instrumentation | None = None

    @property
    def active(self) -> bool:
        return self._instrumentation is not None

    def start(self) -> None:
        """Make the run folder (status "running") and install the probes."""
        if self.active:
            return
        self.run_dir = rundir.new_run_dir("diagnose", self.target, out=self.out)
        trace = self.run_dir / TRACE_SUBDIR / "trace.json.gz" if self.profile_steps else None
        if trace is not None:
            trace.parent.mkdir(parents=True, exist_ok=True)
        config = CollectConfig(
            warmup=self.warmup, profile_steps=self.profile_steps, trace_path=trace
        )
        self._instrumentation = Instrumentation(config)
        self._instrumentation.install()

    def finish(self, error: BaseException | None = None) -> Path | None:
        """Remove the probes, diagnose what was recorded, write the run folder; its path.

        A failure to diagnose or report is logged, never raised into the user's training.
        """
        inst, self._instrumentation = self._instrumentation, None
        if inst is None or self.run_dir is None:
            return None
        from torchdoctor.core.errors import TorchDoctorError
        from torchdoctor.diagnose import examine_profile

        profile = inst.result(
            argv=[self.target],
            ended_by="exception" if error is not None else "completed",
            error=f"{type(error).__name__}: {error}" if error is not None else None,
        )
        try:
            exam = examine_profile(profile, self.run_dir, warmup=self.warmup)
        except TorchDoctorError as exc:
            log.warning("torchdoctor: not diagnosed: %s (see %s)", exc, self.run_dir)
            rundir.finish_run_dir(self.run_dir, error=str(exc))
            return self.run_dir
        self.diagnosis = exam.diagnosis
        if exam.error:
            log.warning("torchdoctor: %s (what was measured is in %s)", exam.error, self.run_dir)
        if self.report and exam.diagnoses:
            from torchdoctor.report import write_reports

            try:
                write_reports(self.run_dir)
            except TorchDoctorError as exc:
                log.warning("torchdoctor: report not written: %s", exc)
        return self.run_dir


class RecordingCallback:
    """What a trainer's callback holds: its options until training starts and names the
    target, then the main process's `recording`, and the run folder (`run_dir`) after it."""

    def __init__(
        self,
        out: str | Path | None = None,
        *,
        warmup: int = DEFAULT_WARMUP,
        profile_steps: int = DEFAULT_PROFILE_STEPS,
        report: bool = True,
    ) -> None:
        super().__init__()
        self._options = RecordingOptions(out, warmup, profile_steps, report)
        self.recording: Recording | None = None

    @property
    def run_dir(self) -> Path | None:
        return self.recording.run_dir if self.recording is not None else None

    def start_recording(self, target: str) -> None:
        self.recording = self._options.recording(target)
        self.recording.start()

    def finish_recording(self) -> None:
        if self.recording is not None:
            self.recording.finish()


@dataclass(frozen=True)
class RecordingOptions:
    """A callback's options, kept until training starts and names the target."""

    out: str | Path | None = None
    warmup: int = DEFAULT_WARMUP
    profile_steps: int = DEFAULT_PROFILE_STEPS
    report: bool = True

    def recording(self, target: str) -> Recording:
        return Recording(
            target,
            out=self.out,
            warmup=self.warmup,
            profile_steps=self.profile_steps,
            report=self.report,
        )
