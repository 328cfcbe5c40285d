"""The typed, compact timeline a trace becomes: one numpy column per field, not a row object.

A Kineto trace is a list of JSON event objects; keeping them as Python dicts costs about a
kilobyte each (HolisticTraceAnalysis keeps a pandas row per event). `Timeline` holds only
what the analyses read, as parallel numpy arrays indexed by event number, with names
interned in one list. Times are microseconds relative to `base_us`, the earliest timestamp,
so float64 keeps sub-nanosecond resolution even on epoch-based clocks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class Kind(IntEnum):
    """What an event is, from its Kineto category (`cat`)."""

    CPU_OP = 0  # aten operators ("cpu_op"; "Operator" in torch < 1.10 traces)
    USER_ANNOTATION = 1  # record_function ranges, ProfilerStep#N, DataLoader __next__
    PYTHON = 2  # python_function (with_stack=True)
    RUNTIME = 3  # cuda_runtime / cuda_driver (hip* on ROCm): launches, syncs, copies
    KERNEL = 4
    MEMCPY = 5
    MEMSET = 6
    GPU_ANNOTATION = 7  # gpu_user_annotation: an annotation projected onto a stream
    SYNC = 8  # cuda_sync: the device-side span of a synchronization
    OTHER = 9


# Lower-cased Kineto category -> Kind. Events of any other category are kept as OTHER.
CATEGORY_KINDS: dict[str, Kind] = {
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "user_annotation": Kind.USER_ANNOTATION,
    "python_function": Kind.PYTHON,
    "cuda_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "cuda_sync": Kind.SYNC,
}

DEVICE_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
HOST_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON, Kind.RUNTIME)


@dataclass(frozen=True)
class TraceMeta:
    """What the trace says about where it was recorded."""

    source: str
    device_name: str | None = None
    cuda_capability: tuple[int, int] | None = None
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    host_name: str | None = None
    skipped_events: int = 0
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Timeline:
    """Complete ('X') events of one trace (one rank) as parallel columns.

    Columns, one entry per event:
      ts, dur    start and duration, microseconds (ts relative to `base_us`);
      kind       `Kind` code (int8);
      name_id    index into `names`;
      pid, tid   process/thread on the host; device index/stream on the device;
      corr       launch correlation id (runtime call <-> device activity), -1 if none;
      ext_id     "External id" linking a cpu_op to its runtime calls and kernels, -1 if none;
      flops      FLOPs of a cpu_op: the trace's `flops` field, else estimated from its shapes
                 (NaN when unknown);
      nbytes     bytes moved: a copy's byte count, or a cpu_op's estimated input+output bytes
                 (NaN when unknown);
      dtype      a cpu_op's dtype from its "Input type", as an index in `shapes.OP_DTYPES`
                 (-1 when not recorded, not floating point, or not a cpu_op).
    """

    names: list[str]
    ts: FloatArray
    dur: FloatArray
    kind: npt.NDArray[np.int8]
    name_id: npt.NDArray[np.int32]
    pid: IntArray
    tid: IntArray
    corr: IntArray
    ext_id: IntArray
    flops: FloatArray
    nbytes: FloatArray
    dtype: npt.NDArray[np.int8]
    base_us: float = 0.0
    meta: TraceMeta = field(default_factory=lambda: TraceMeta(source="<memory>"))

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    @property
    def end(self) -> FloatArray:
        return self.ts + self.dur

    def mask(self, *kinds: Kind) -> BoolArray:
        # A 256-entry lookup table indexed by the int8 code (as uint8): one gather, several
        # times cheaper than np.isin's sort on a million events.
        table = np.zeros(256, dtype=bool)
        table[[int(k) & 0xFF for k in kinds]] = True
        return table[self.kind.view(np.uint8)]

    def name_mask(self, predicate: Callable[[str], bool]) -> BoolArray:
        """Events whose name satisfies `predicate(name)` (evaluated once per distinct name)."""
        hits = np.array([bool(predicate(n)) for n in self.names] or [False], dtype=bool)
        return hits[self.name_id] if len(self.names) else np.zeros(len(self), dtype=bool)

    @property
    def has_device_activity(self) -> bool:
        return bool(self.mask(*DEVICE_KINDS).any())
