"""The one exception hierarchy.

Every error a user can cause is a `TorchDoctorError` (or a subclass per stage). The CLI
prints it as one line, `error: <message>`, and exits with `exit_code` (2 for user errors).
Messages say what failed, the offending value, and what to do about it::

    raise KnobError("unknown knob 'batchsize'", hint="known knobs: batch_size, ...")
"""

from __future__ import annotations


class TorchDoctorError(Exception):
    """Root of every error torchdoctor raises on purpose."""

    exit_code: int = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}; {self.hint}"
        return self.message


class UsageError(TorchDoctorError):
    """A command-line argument or option is invalid."""


class RecordError(TorchDoctorError):
    """A saved record cannot be read: wrong schema, unknown version, malformed content."""


class EnvError(TorchDoctorError):
    """The environment fingerprint or the ceilings could not be obtained."""


class MeasureError(TorchDoctorError):
    """A statement under measurement failed, or a timing option is invalid."""


class WorkloadError(TorchDoctorError):
    """A workload cannot be found, loaded or built."""


class KnobError(TorchDoctorError):
    """A knob or recipe is unknown, out of its domain, or does not apply here."""


class KnobNotApplicable(KnobError):
    """A knob setting that does not apply here; `reason` says why, without the value."""

    def __init__(self, message: str, *, knob: str, reason: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.knob = knob
        self.reason = reason


class EngineError(TorchDoctorError):
    """Running a workload under a recipe failed."""


class CollectError(TorchDoctorError):
    """Profiling or instrumenting a job failed."""


class TraceError(TorchDoctorError):
    """A profiler trace cannot be read or holds no usable events."""


class DiagnoseError(TorchDoctorError):
    """A diagnosis cannot be made from what was measured."""


class ScaleError(TorchDoctorError):
    """A scaling study cannot run: a backend, a rendezvous or a world size that is not there."""


class TuneError(TorchDoctorError):
    """A tuning study cannot start or continue."""


class ReportError(TorchDoctorError):
    """A report cannot be rendered from the given records."""


class ScriptExit(TorchDoctorError):
    """A user's script ended with its own non-zero exit code, which we pass through."""

    def __init__(self, message: str, *, exit_code: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = exit_code
