"""The one exception hierarchy, and the exit codes a command ends with.

Every error a user can cause is a `TorchDoctorError` (or a subclass per stage). The CLI
prints it as one line, `error: <message>`, and exits with `exit_code` (`ExitCode.ERROR`; a
user's script that fails, `ExitCode.SCRIPT_FAILED`).
Messages say what failed, the offending value, and what to do about it::

    raise KnobError("unknown knob 'batchsize'", hint="known knobs: batch_size, ...")
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What a `torchdoctor` command's exit status means, for a CI job to gate on
    (`torchdoctor --help` lists them)."""

    #: Done, and nothing to gate on.
    OK = 0
    #: Done, and the command found what it gates on: `diff` found B slower than A.
    FINDINGS = 1
    #: Bad usage or input, or a failure torchdoctor reports in one line (`error: ...`).
    ERROR = 2
    #: The user's own script failed (its own exit code is said in the message, not passed
    #: through: a script's 2 would read as a usage error).
    SCRIPT_FAILED = 3
    #: Interrupted (Ctrl-C).
    INTERRUPTED = 130


#: What each code means, in the words `torchdoctor --help` prints.
EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.FINDINGS: "a finding the command gates on (diff: B is slower than A)",
    ExitCode.ERROR: "usage error, bad input, or a failure reported in one line",
    ExitCode.SCRIPT_FAILED: "your script failed (its own exit code is in the message)",
    ExitCode.INTERRUPTED: "interrupted",
}


class TorchDoctorError(Exception):
    """Root of every error torchdoctor raises on purpose."""

    exit_code: int = ExitCode.ERROR

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
    """A user's script ended with its own non-zero exit code: `script_code`. The command
    exits with `ExitCode.SCRIPT_FAILED`, whatever the script's code, so that a script's 2 is
    never read as a usage error."""

    exit_code = ExitCode.SCRIPT_FAILED

    def __init__(self, message: str, *, script_code: int, hint: str | None = None) -> None:
        if f"code {script_code}" not in message:
            message = f"{message} (the script's exit code {script_code})"
        super().__init__(message, hint=hint)
        self.script_code = script_code
