"""Stage: procs. Supervised child processes: a session in a spawned worker, or a user's live
script paused at its steps, each with a deadline and a memory cap, driven by one typed
request/reply protocol, and failing with a typed `FailureKind` (see docs/DESIGN.md).

It is the one place a process is started, paused or ended: the tuner's arms (`tune/`), a
script run instrumented (`run_script`: diagnose, the scaling study's torchrun jobs, a cure's
check), serve's model instances, each ended as a tree (`end_tree`: SIGCONT, SIGTERM, then
SIGKILL after a grace period; procs/_tree.py).

The script worker and `run_script` are loaded on first use: they need `torchdoctor.collect`'s
launcher, which a spawned workload worker (this package's first import in that process) has no
use for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.core.lazy import lazy_getattr
from torchdoctor.procs._command import run_command
from torchdoctor.procs._failure import (
    FailureKind,
    WorkerFailure,
    classify_exception,
    classify_reason,
)
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
from torchdoctor.procs._spawn import end_process, spawn_process
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
from torchdoctor.procs._tree import (
    TERMINATE_GRACE_S,
    end_popen,
    end_processes,
    end_tree,
    tree_of,
)
from torchdoctor.procs._worker import SessionHost

if TYPE_CHECKING:
    from torchdoctor.procs._capped import run_capped_step
    from torchdoctor.procs._run import run_script
    from torchdoctor.procs._script import ScriptWorker, ScriptWorkerRecord

_EXPORTS = {
    "run_capped_step": "torchdoctor.procs._capped",
    "run_script": "torchdoctor.procs._run",
    "ScriptWorker": "torchdoctor.procs._script",
    "ScriptWorkerRecord": "torchdoctor.procs._script",
}

__all__ = [
    "ENGINE_FACTORY",
    "TERMINATE_GRACE_S",
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
    "canonical_factory",
    "classify_exception",
    "classify_reason",
    "end_popen",
    "end_process",
    "end_processes",
    "end_tree",
    "engine_session",
    "run_capped_step",
    "run_command",
    "run_script",
    "spawn_process",
    "start_worker",
    "tree_of",
]

__getattr__ = lazy_getattr(__name__, _EXPORTS)
