"""Stage: procs. Supervised child processes: a session in a spawned worker, or a user's live
script paused at its steps, each with a deadline and a memory cap, driven by one typed
request/reply protocol, and failing with a typed `FailureKind` (see docs/DESIGN.md).

The tuner stands on it (`tune/`); whatever else runs a training job in another process (ranks
of a scaling study, a server and its load generator) is meant to stand on it too, instead of
importing sideways from the tuner.

The script worker is loaded on first use: it needs `torchdoctor.collect`'s launcher, which a
spawned workload worker (this package's first import in that process) has no use for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.core.lazy import lazy_getattr
from torchdoctor.procs._failure import (
    FailureKind,
    WorkerFailure,
    classify_exception,
    classify_reason,
)
from torchdoctor.procs._pool import CUDA_POOL_SIZE, WorkerPool, end_now, pool_size
from torchdoctor.procs._protocol import (
    Done,
    Exit,
    Failed,
    Losses,
    Park,
    Parked,
    Prepare,
    Prepared,
    Ran,
    Reference,
    Release,
    Reply,
    ReplyT,
    Request,
    Run,
    StepRow,
    Unpark,
)
from torchdoctor.procs._spec import (
    ENGINE_FACTORY,
    SessionLike,
    SessionSpec,
    canonical_factory,
    engine_session,
)
from torchdoctor.procs._supervisor import (
    InProcessWorker,
    SubprocessWorker,
    WorkerLike,
    start_worker,
)
from torchdoctor.procs._worker import SessionHost

if TYPE_CHECKING:
    from torchdoctor.procs._capped import run_capped_step
    from torchdoctor.procs._script import ScriptWorker, ScriptWorkerRecord

_EXPORTS = {
    "run_capped_step": "torchdoctor.procs._capped",
    "ScriptWorker": "torchdoctor.procs._script",
    "ScriptWorkerRecord": "torchdoctor.procs._script",
}

__all__ = [
    "CUDA_POOL_SIZE",
    "ENGINE_FACTORY",
    "Done",
    "Exit",
    "Failed",
    "FailureKind",
    "InProcessWorker",
    "Losses",
    "Park",
    "Parked",
    "Prepare",
    "Prepared",
    "Ran",
    "Reference",
    "Release",
    "Reply",
    "ReplyT",
    "Request",
    "Run",
    "ScriptWorker",
    "ScriptWorkerRecord",
    "SessionHost",
    "SessionLike",
    "SessionSpec",
    "StepRow",
    "SubprocessWorker",
    "Unpark",
    "WorkerFailure",
    "WorkerLike",
    "WorkerPool",
    "canonical_factory",
    "classify_exception",
    "classify_reason",
    "end_now",
    "engine_session",
    "pool_size",
    "run_capped_step",
    "start_worker",
]

__getattr__ = lazy_getattr(__name__, _EXPORTS)
