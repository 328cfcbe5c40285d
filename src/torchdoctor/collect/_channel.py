"""The messages of the control channel between a driven script and the process driving it.

The script's side is `torchdoctor.collect.control` (inside the user's process); the driver's is
`torchdoctor.procs.ScriptWorker`. Both import these types from here, so the exchange the
control module's docstring describes is checked by type, not by string keys. They cross the
`multiprocessing` connection by pickling; nothing here imports torch.

Script -> driver: `ScriptHello` on connecting, `ScriptReady` at the ready boundary,
`ScriptChunk` after a chunk of steps (or with `ended` when the script ended mid-chunk),
`ScriptFreed` after a release, `Parked` after a park or unpark, `ScriptError` when it
cannot go on. Driver -> script: `DriverWelcome` (the seed), then `DriverRun`, `DriverRelease`,
`DriverPark` or `DriverStop`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: One step of a chunk: seconds, samples (None without a DataLoader), loss (None when there
#: was none or it was not finite).
Row = tuple[float, int | None, float | None]


@dataclass(frozen=True)
class ScriptHello:
    """The script's process connected."""

    pid: int


@dataclass(frozen=True)
class DriverWelcome:
    """The seed the script's process seeds random, numpy and torch with (None: unseeded), and
    the cap on its device memory once it runs on a GPU (`--max-memory`; None: none)."""

    seed: int | None
    device_memory_cap_bytes: int | None = None


@dataclass(frozen=True)
class ScriptReady:
    """The script ran its start-up and first steps and waits for a command. `injection` is the
    `InjectionRecord` JSON of the recipe's knobs (None without a recipe); `loaders` the
    `DataLoaderInfo` JSON of the DataLoaders it iterated; `device` "cuda" once it allocated
    on a GPU (`collect.hooks.script_device`), else "cpu"."""

    startup_s: float
    seed: int | None
    script_seeded: bool
    injection: dict[str, Any] | None
    loaders: list[dict[str, Any]]
    device: str = "cpu"


@dataclass(frozen=True)
class DriverRun:
    """Run `steps` more steps; with `release`, hand cached device memory back after them."""

    steps: int
    release: bool = False


@dataclass(frozen=True)
class DriverRelease:
    """Hand the CUDA caching allocator's free blocks back to the device now."""


@dataclass(frozen=True)
class DriverPark:
    """Move the script's trained state off the GPU (`off`), or back onto it, now
    (`torchdoctor.engine.park`): another process runs on the device between its chunks."""

    off: bool


@dataclass(frozen=True)
class DriverStop:
    """Stop the script at its boundary (it unwinds as after a step limit)."""


@dataclass(frozen=True)
class ScriptChunk:
    """The steps run since the last command. `ended`: the script ended by itself (cleanly)
    after them, with `exit_code`."""

    steps: list[Row]
    peak_memory_bytes: int | None
    ended: bool = False
    exit_code: int | None = None


@dataclass(frozen=True)
class ScriptFreed:
    """The release was done."""


@dataclass(frozen=True)
class Parked:
    """A park or an unpark (`torchdoctor.engine.park`): the bytes moved, the bytes the process
    still holds on the device after it, the seconds it took (no step's), and `pinned`, why
    nothing could move (CUDA graphs), or None. A park also says the device's free and total
    bytes as it leaves it (`torchdoctor.engine.park.Moved`). A process on a CPU answers with
    zeros.

    One message for both channels: a script's (to its driver) and a worker's (the reply to
    `procs`' `Park` and `Unpark`, re-exported there)."""

    moved_bytes: int = 0
    left_bytes: int = 0
    seconds: float = 0.0
    pinned: str | None = None
    free_bytes: int = 0
    total_bytes: int = 0

    @classmethod
    def of(cls, moved: Any) -> Parked:
        """The message of a park or unpark done (a `torchdoctor.engine.park.Moved`)."""
        return cls(
            moved.moved_bytes,
            moved.left_bytes,
            moved.seconds,
            moved.pinned,
            moved.free_bytes,
            moved.total_bytes,
        )


@dataclass(frozen=True)
class ScriptError:
    """The script cannot answer: a bad command, or it failed or ended before it could be
    driven (`ended`, with `exit_code` when it exited). `ranks_disagree`: the ranks of a
    torchrun job took the recipe differently (collect/rank_agreement.py), which no recipe
    can be judged on: bad input, not a failed trial."""

    reason: str
    ended: bool = False
    exit_code: int | None = None
    ranks_disagree: bool = False
