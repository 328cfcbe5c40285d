"""The request/reply protocol between a parent and a supervised worker.

Every worker (a workload's session in a spawned process, the same session in this process, a
user's live script) answers the same seven requests with the same replies, so whoever drives
a worker (the tuner's arms today) does not know which kind it holds. Messages are small frozen
dataclasses: they cross a `multiprocessing` pipe by pickling, and a reader sees typed fields
where it used to look up string keys.

=================  ===========  ==========================================================
request            reply        what it does
=================  ===========  ==========================================================
`Prepare`          `Prepared`   build (or launch) the session; the time that took
`Run`              `Ran`        run a chunk of steps; each step's time, samples and loss
`Release`          `Done`       hand cached free device memory back (CUDA)
`Reference`        `Losses`     the losses of a fresh session with a perturbed start
`Park`             `Parked`     move the trained state off the device (CUDA; another runs)
`Unpark`           `Parked`     move it back before the next chunk
`Exit`             `Done`       stop serving (a worker process exits)
=================  ===========  ==========================================================

A worker that cannot answer replies `Failed` (its `FailureKind` and a reason) instead;
`Request.expect` turns that into a `WorkerFailure` on the parent's side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar, cast

from torchdoctor.procs._failure import FailureKind, WorkerFailure
from torchdoctor.procs._spec import SessionSpec


class StepRow(NamedTuple):
    """One training step as a worker reports it. The loss is None when it was not finite
    (NaN does not survive every JSON encoder) or the session reports none."""

    total_s: float
    samples: int | None
    loss: float | None


# ---- replies ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    """The session is ready. `prepare_s`: from the request to ready, seen by the worker's
    parent side. A script worker also reports `startup_s` (the script's own count of its
    start-up), `injection` (the `InjectionRecord` JSON of the recipe's knobs, None without a
    recipe), `loaders` (the `DataLoaderInfo` JSON of the loaders it iterated) and `device`
    ("cuda" once the script allocated on a GPU, else "cpu")."""

    prepare_s: float
    startup_s: float | None = None
    injection: dict[str, Any] | None = None
    loaders: tuple[dict[str, Any], ...] = ()
    device: str | None = None


@dataclass(frozen=True)
class Ran:
    """A chunk of steps. `peak_memory_bytes`: the session's peak (device memory on CUDA, else
    resident memory). A script that reached its end mid-chunk was relaunched `restarts` times
    to finish it, at the start-up costs `restart_s`, which are no step's; `startup_s` is the
    launch this chunk needed first, when the worker was not prepared."""

    steps: tuple[StepRow, ...]
    peak_memory_bytes: int | None = None
    restarts: int = 0
    restart_s: tuple[float, ...] = ()
    startup_s: float | None = None


@dataclass(frozen=True)
class Losses:
    """The losses of a reference run, step by step (None: not finite)."""

    losses: tuple[float | None, ...]


@dataclass(frozen=True)
class Done:
    """The request was carried out and has nothing to report."""


@dataclass(frozen=True)
class Parked:
    """A park or an unpark (`torchdoctor.engine.park`): the bytes moved, the bytes the process
    still holds on the device after it, the seconds it took (no step's), and `pinned`, why
    nothing could move (CUDA graphs), or None. A park also says the device's free and total
    bytes as it leaves it (`torchdoctor.engine.park.Moved`). A worker on a CPU answers with
    zeros."""

    moved_bytes: int = 0
    left_bytes: int = 0
    seconds: float = 0.0
    pinned: str | None = None
    free_bytes: int = 0
    total_bytes: int = 0


@dataclass(frozen=True)
class Failed:
    """The worker could not answer: why, as a kind and a one-line reason."""

    kind: FailureKind
    reason: str


Reply = Prepared | Ran | Losses | Done | Parked | Failed

#: The successful reply a request asks for (`Request[ReplyT]`).
ReplyT = TypeVar("ReplyT", Prepared, Ran, Losses, Done, Parked)


# ---- requests --------------------------------------------------------------------------------


class Request(Generic[ReplyT]):
    """A request whose successful answer is a `ReplyT` (`reply_type`)."""

    reply_type: ClassVar[type[Reply]]

    def expect(self, reply: object) -> ReplyT:
        """`reply` as this request's answer; a `Failed` one (or a wrong type) raises
        `WorkerFailure`."""
        if isinstance(reply, Failed):
            raise WorkerFailure(reply.kind, reply.reason)
        if not isinstance(reply, self.reply_type):
            raise WorkerFailure(
                FailureKind.ERROR,
                f"the worker answered {type(self).__name__} with {type(reply).__name__}",
            )
        return cast(ReplyT, reply)


@dataclass(frozen=True)
class Prepare(Request[Prepared]):
    """Build the session of `spec` (a workload worker; a script worker was given its script
    when it was made and takes no spec). `memory_cap_bytes` on CUDA bounds the worker's device
    memory too (its parent watches host memory)."""

    reply_type: ClassVar[type[Reply]] = Prepared
    spec: SessionSpec | None = None
    memory_cap_bytes: int | None = None


@dataclass(frozen=True)
class Run(Request[Ran]):
    """Run `steps` steps; with `release`, hand cached device memory back after them."""

    reply_type: ClassVar[type[Reply]] = Ran
    steps: int
    release: bool = False


@dataclass(frozen=True)
class Release(Request[Done]):
    """Hand the CUDA caching allocator's free blocks back to the device."""

    reply_type: ClassVar[type[Reply]] = Done


@dataclass(frozen=True)
class Reference(Request[Losses]):
    """The first `steps` losses of a fresh session of the prepared one whose initial weights
    carry the engine's no-op perturbation `perturbation` (> 0); the prepared session is left
    as it was."""

    reply_type: ClassVar[type[Reply]] = Losses
    perturbation: int
    steps: int


@dataclass(frozen=True)
class Park(Request[Parked]):
    """Move the session's trained state (weights, gradients, buffers, optimizer state) off
    the device and hand the freed blocks back: another worker runs on the GPU next."""

    reply_type: ClassVar[type[Reply]] = Parked


@dataclass(frozen=True)
class Unpark(Request[Parked]):
    """Move the parked state back onto the device (nothing when it is not parked)."""

    reply_type: ClassVar[type[Reply]] = Parked


@dataclass(frozen=True)
class Exit(Request[Done]):
    """Stop serving: a worker process returns from its loop and exits."""

    reply_type: ClassVar[type[Reply]] = Done


#: Every request type, for dispatch tables and tests.
REQUESTS: tuple[type[Request[Any]], ...] = (
    Prepare,
    Run,
    Release,
    Reference,
    Park,
    Unpark,
    Exit,
)
