"""Host-device synchronization points and host<->device copies.

A sync point blocks the host until the device catches up, emptying the launch queue: explicit
device/stream/event synchronize calls, and reading a device scalar (`tensor.item()`, which
runs `aten::_local_scalar_dense`: a device-to-host copy plus a stream synchronize). A
`_local_scalar_dense` that already contains a synchronize call counts once.

Copies are split by direction and by host memory kind as the trace names them, e.g.
"Memcpy HtoD (Pinned -> Device)": pageable host memory forces a staged, synchronous copy.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from torchdoctor.analyze import intervals as iv
from torchdoctor.analyze.records import CopyStat, SyncStats
from torchdoctor.analyze.steps import in_windows
from torchdoctor.analyze.timeline import Kind, Timeline

SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
    }
)
SCALAR_READS = frozenset({"aten::item", "aten::_local_scalar_dense"})
_COPY_NAME = re.compile(r"Memcpy\s+(\w+)\s*(?:\((\w+)\s*->\s*(\w+)\))?", re.IGNORECASE)


def _copy_kind(name: str) -> tuple[str, str]:
    m = _COPY_NAME.match(name)
    if not m:
        return "other", "unknown"
    direction = m.group(1)
    ends = {(m.group(2) or "").lower(), (m.group(3) or "").lower()}
    memory = "pinned" if "pinned" in ends else "pageable" if "pageable" in ends else "unknown"
    return direction, memory


def copy_stats(tl: Timeline) -> list[CopyStat]:
    idx = np.flatnonzero(tl.mask(Kind.MEMCPY))
    if idx.size == 0:
        return []
    # Classify each distinct copy name once, then sum per class with bincount: it adds in
    # event order, as a loop over the copies would (unknown byte counts add 0).
    name_ids, inverse = np.unique(tl.name_id[idx], return_inverse=True)
    keys = [_copy_kind(tl.names[int(n)]) for n in name_ids.tolist()]
    classes = sorted(set(keys))
    group = np.asarray([classes.index(k) for k in keys], dtype=np.int64)[inverse]
    nbytes = np.nan_to_num(tl.nbytes[idx], nan=0.0)
    counts = np.bincount(group, minlength=len(classes)).tolist()
    sizes = np.bincount(group, weights=nbytes, minlength=len(classes)).tolist()
    times = np.bincount(group, weights=tl.dur[idx], minlength=len(classes)).tolist()
    return [
        CopyStat(direction=d, memory=m, count=int(c), bytes=b, time_us=t)
        for (d, m), c, b, t in zip(classes, counts, sizes, times, strict=True)
    ]


def sync_stats(tl: Timeline, windows: iv.Intervals) -> SyncStats:
    is_sync = tl.name_mask(lambda n: n in SYNC_CALLS) & tl.mask(Kind.RUNTIME)
    is_scalar = tl.name_mask(lambda n: n in SCALAR_READS) & tl.mask(Kind.CPU_OP)
    by_name = Counter(tl.names[int(i)] for i in tl.name_id[is_sync | is_scalar])
    sync_ts = np.sort(tl.ts[is_sync])
    lsd = is_scalar & tl.name_mask(lambda n: n == "aten::_local_scalar_dense")
    inside = np.searchsorted(sync_ts, tl.end[lsd]) - np.searchsorted(sync_ts, tl.ts[lsd])
    points = np.concatenate((tl.ts[is_sync], tl.ts[lsd][inside == 0]))
    per_step = None
    if windows[0].size:
        per_step = float(in_windows(windows, points).sum()) / windows[0].size
    return SyncStats(
        total=int(points.size),
        per_step=per_step,
        by_name=dict(sorted(by_name.items())),
        copies=copy_stats(tl),
    )
