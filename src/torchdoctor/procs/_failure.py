"""How a supervised child fails: one kind from a closed set, and the exception that carries it.

The kinds are string-valued (`StrEnum`), so a kind written into a record's JSON is the same
text it always was ("crash", "oom", ...), and records stored before the enum existed read
back unchanged.
"""

from __future__ import annotations

from enum import StrEnum


class FailureKind(StrEnum):
    """Why a child could not answer, as far as its parent can tell.

    A child that hangs and one that is merely slow look the same from outside (no answer by the
    deadline), so both are `TIMEOUT`: telling them apart would need the child's cooperation,
    which a hung child cannot give.
    """

    #: The process died without a word (a signal, a segfault, `os._exit`, a broken pipe).
    CRASH = "crash"
    #: Out of memory: over the resident-memory cap the parent watches, or an allocator's
    #: out-of-memory error inside the child (host or device).
    OOM = "oom"
    #: No answer before the deadline (hung or too slow); the child was killed.
    TIMEOUT = "timeout"
    #: The training loss became NaN or infinite (judged by the caller from the losses).
    NAN = "nan"
    #: Any other exception the child raised (or reported), or a request it could not serve.
    ERROR = "error"


#: Substrings of allocator messages that mean "out of memory": PyTorch's CPU allocator
#: ("DefaultCPUAllocator: can't allocate memory"), CUDA ("CUDA out of memory"), HIP/MPS.
_OOM_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory")


def classify_exception(exc: BaseException) -> FailureKind:
    """The kind of failure an exception raised in a child means: `OOM` or `ERROR`."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return FailureKind.OOM
    text = str(exc).lower()
    if any(marker in text for marker in _OOM_MARKERS):
        return FailureKind.OOM
    return FailureKind.ERROR


def classify_reason(reason: str) -> FailureKind:
    """The kind of failure a child's one-line reason ("Type: message (where)") means, for a
    child that reports its failure as text (a script over its control channel)."""
    if reason.split(":", 1)[0] in ("MemoryError", "OutOfMemoryError"):
        return FailureKind.OOM
    return classify_exception(RuntimeError(reason))


class WorkerFailure(Exception):
    """A supervised child could not answer a request: its `kind`, and a one-line `reason`."""

    def __init__(self, kind: FailureKind, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
