"""Host-device synchronization points and host<->device copies.

A sync point blocks the host until the device catches up, emptying the launch queue: explicit
device/stream/event synchronize calls, and reading a device scalar (`tensor.item()`, which
runs `aten::_local_scalar_dense`: a device-to-host copy plus a stream synchronize). A
`_local_scalar_dense` that already contains a synchronize call counts once.

A scalar read is a sync only when it waits for the device. On a trace that records the device
runtime, a read of a device tensor shows its copy and wait beneath it (CUDA: cudaMemcpyAsync
then cudaStreamSynchronize, as the H100 traces in tests/data/traces record; ROCm:
hipMemcpyWithStream); a read with neither beneath read a host tensor, such as the step
counters AdamW keeps on the CPU and reads with `.item()` every step (the A100 trace there
holds 945 such reads, each 1-2 us). Those are counted apart (`host_scalar_reads`). A trace
with no runtime events cannot tell, and counts every read as before.

torchdoctor's own syncs run inside a `TOOL_SYNC_RANGE` annotation (core.tool_syncs): they are
listed apart (`tool_by_name`), not counted as the job's.

Copies are split by direction and by host memory kind as the trace names them, e.g.
"Memcpy HtoD (Pinned -> Device)": pageable host memory forces a staged, synchronous copy.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from torchdoctor.analyze import intervals as iv
from torchdoctor.analyze.records import CopyStat, SyncStats
from torchdoctor.analyze.step_windows import in_windows
from torchdoctor.analyze.timeline import BoolArray, Kind, Timeline
from torchdoctor.core.tool_syncs import TOOL_SYNC_RANGE

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
# The op GradScaler.unscale_ runs before GradScaler.step reads found_inf (torch.amp).
GRAD_SCALER_UNSCALE = "aten::_amp_foreach_non_finite_check_and_unscale_"
#: Runtime calls that copy between host and device: the copy of a device scalar's read.
COPY_CALL_PREFIXES = ("cudaMemcpy", "cuMemcpy", "hipMemcpy")
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


def _grad_scaler_reads(tl: Timeline, lsd: np.ndarray) -> BoolArray:
    """Which of the `_local_scalar_dense` calls (indices) are GradScaler's found_inf read.

    GradScaler.step unscales the gradients (`aten::_amp_foreach_non_finite_check_and_unscale_`)
    and then, in `_maybe_opt_step`, reads found_inf with `.item()` to decide whether to run
    optimizer.step. That read is the AMP recipe's own sync, not the script's: the first scalar
    read on the same thread after each unscale is it.
    """
    out = np.zeros(lsd.size, dtype=bool)
    unscale = np.flatnonzero(
        tl.name_mask(lambda n: n == GRAD_SCALER_UNSCALE) & tl.mask(Kind.CPU_OP)
    )
    if unscale.size == 0 or lsd.size == 0:
        return out
    order = np.argsort(tl.ts[lsd], kind="stable")
    taken: set[int] = set()
    for u in unscale[np.argsort(tl.ts[unscale], kind="stable")].tolist():
        for k in order.tolist():
            i = int(lsd[k])
            if k in taken or tl.ts[i] < tl.end[u] or tl.tid[i] != tl.tid[u]:
                continue
            if tl.pid[i] == tl.pid[u]:
                taken.add(k)
                out[k] = True
                break
    return out


def _idle_after(
    tl: Timeline, selected: BoolArray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per host-resume instant in `ends`: the device idle from it to the next device activity
    (0 when the device is busy then), and where that idle stretch ends."""
    dev = np.flatnonzero(selected)
    busy_s, busy_e = iv.union(tl.ts[dev], tl.end[dev])
    if busy_s.size == 0:
        return np.zeros(ends.size), ends.copy()
    k = np.searchsorted(busy_s, ends, side="right")  # busy intervals starting at or before
    inside = (k > 0) & (ends < busy_e[np.clip(k - 1, 0, None)])
    nxt = np.where(k < busy_s.size, busy_s[np.clip(k, 0, busy_s.size - 1)], ends)
    gap = np.where(inside, 0.0, np.clip(nxt - ends, 0.0, None))
    return gap, ends + gap


def sync_stats(tl: Timeline, windows: iv.Intervals, selected: BoolArray | None = None) -> SyncStats:
    """Sync points, and on a GPU trace with steps, what the ones inside the steps cost.

    The cost of a sync on a GPU is not the time the host spends blocked in it (on a GPU-bound
    job that is the launch queue draining, work the device does anyway) but the device idle
    that follows it: once the sync returns the queue is empty, and the device waits until the
    host launches again. Removing the sync lets the host run ahead by at most the time it was
    blocked, so each sync point is charged min(device idle after it, host time blocked in it);
    overlapping charges count once.
    """
    is_sync = tl.name_mask(lambda n: n in SYNC_CALLS) & tl.mask(Kind.RUNTIME)
    is_scalar = tl.name_mask(lambda n: n in SCALAR_READS) & tl.mask(Kind.CPU_OP)
    lsd_mask = is_scalar & tl.name_mask(lambda n: n == "aten::_local_scalar_dense")
    lsd = np.flatnonzero(lsd_mask)
    scaler = _grad_scaler_reads(tl, lsd)
    sync_idx = np.flatnonzero(is_sync)
    # A sync call inside a scalar read is that read's sync, not another point.
    owner = _enclosing(tl, lsd, sync_idx)
    own_sync = np.zeros(lsd.size, dtype=bool)
    own_sync[owner[owner >= 0]] = True
    waits = _waits_for_device(tl, lsd)
    tool_ranges = np.flatnonzero(
        tl.name_mask(lambda n: n == TOOL_SYNC_RANGE) & tl.mask(Kind.USER_ANNOTATION, Kind.CPU_OP)
    )
    tool_lsd = _inside_any(tl, lsd, tool_ranges)
    tool_sync = _inside_any(tl, sync_idx, tool_ranges)
    # GradScaler's reads drop out with their aten::item parents and inner sync calls; so do
    # reads of host tensors (no device wait) and torchdoctor's own syncs.
    excluded = set(lsd[scaler].tolist())
    keep_lsd = ~scaler & waits & ~tool_lsd
    dropped_owner = np.isin(owner, np.flatnonzero(~keep_lsd)) & (owner >= 0)
    keep_sync = ~dropped_owner & ~tool_sync
    by_name: Counter[str] = Counter(tl.names[int(i)] for i in tl.name_id[sync_idx[keep_sync]])
    by_name.update(tl.names[int(i)] for i in tl.name_id[lsd[keep_lsd]])
    items = np.flatnonzero(is_scalar & ~lsd_mask)
    item_of = _enclosing(tl, items, lsd)
    drop_items = np.zeros(items.size, dtype=bool)
    drop_items[item_of[~keep_lsd & (item_of >= 0)]] = True
    by_name.update(tl.names[int(i)] for i in tl.name_id[items[~drop_items]])
    tool_by_name: Counter[str] = Counter(
        tl.names[int(i)] for i in tl.name_id[np.concatenate((sync_idx[tool_sync], lsd[tool_lsd]))]
    )
    # Each point: (host blocked from, to).
    point_idx = np.concatenate((sync_idx[keep_sync], lsd[keep_lsd & ~own_sync]))
    starts, ends = tl.ts[point_idx], tl.end[point_idx]
    per_step = None
    extra: dict[str, float | None] = {}
    if windows[0].size:
        inside_steps = in_windows(windows, starts)
        per_step = float(inside_steps.sum()) / windows[0].size
        extra["step_us"] = float(np.sum(windows[1] - windows[0]))
        extra["blocked_us"] = iv.length(iv.union(starts[inside_steps], ends[inside_steps]))
        if selected is not None and selected.any():
            s_in, e_in = starts[inside_steps], ends[inside_steps]
            gap, gap_end = _idle_after(tl, selected, e_in)
            extra["idle_after_us"] = iv.length(iv.union(e_in, gap_end))
            cost = np.minimum(gap, e_in - s_in)
            extra["cost_us"] = iv.length(iv.union(e_in, e_in + cost))
    return SyncStats(
        total=int(point_idx.size),
        per_step=per_step,
        by_name=dict(sorted(by_name.items())),
        copies=copy_stats(tl),
        grad_scaler_reads=len(excluded),
        host_scalar_reads=int(np.sum(~waits & ~tool_lsd)),
        tool_by_name=dict(sorted(tool_by_name.items())),
        **extra,
    )


def _enclosing(tl: Timeline, outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """Per `inner` event, the position in `outer` of the event enclosing it on the same thread
    (-1 if none). `outer` events of one kind do not nest in each other (scalar reads, their
    aten::item parents), so the latest one to start before an inner event is the only
    candidate."""
    found = np.full(inner.size, -1)
    if outer.size == 0 or inner.size == 0:
        return found
    by_start = np.argsort(tl.ts[outer], kind="stable")
    o_ts = tl.ts[outer][by_start]
    pos = np.searchsorted(o_ts, tl.ts[inner], side="right") - 1
    cand = outer[by_start][np.clip(pos, 0, None)]
    inner_end = tl.ts[inner] + tl.dur[inner]
    cand_end = tl.ts[cand] + tl.dur[cand]
    inside = (pos >= 0) & (inner_end <= cand_end) & (tl.tid[inner] == tl.tid[cand])
    found[inside] = by_start[np.clip(pos, 0, None)][inside]
    return found


def _inside_any(tl: Timeline, inner: np.ndarray, ranges: np.ndarray) -> BoolArray:
    """Which `inner` events lie inside one of `ranges` (few: one per tool sync) on their
    thread."""
    out = np.zeros(inner.size, dtype=bool)
    i_ts, i_tid = tl.ts[inner], tl.tid[inner]
    i_end = i_ts + tl.dur[inner]
    for r in ranges.tolist():
        r_end = tl.ts[r] + tl.dur[r]
        out |= (i_ts >= tl.ts[r]) & (i_end <= r_end) & (i_tid == tl.tid[r])
    return out


def _waits_for_device(tl: Timeline, lsd: np.ndarray) -> BoolArray:
    """Which scalar reads (indices) waited for the device: a copy or synchronize runtime call
    runs beneath them. All of them when the trace records no runtime calls (a CPU-only
    profile, or one without CUDA activity): it cannot tell."""
    runtime = tl.mask(Kind.RUNTIME)
    if not runtime.any():
        return np.ones(lsd.size, dtype=bool)
    waiting = np.flatnonzero(
        runtime & tl.name_mask(lambda n: n in SYNC_CALLS or n.startswith(COPY_CALL_PREFIXES))
    )
    return _has_inner(tl, lsd, waiting)


def _has_inner(tl: Timeline, outer: np.ndarray, inner: np.ndarray) -> BoolArray:
    """Which `outer` events enclose at least one `inner` event on the same thread."""
    out = np.zeros(outer.size, dtype=bool)
    pos = _enclosing(tl, outer, inner)
    out[pos[pos >= 0]] = True
    return out
