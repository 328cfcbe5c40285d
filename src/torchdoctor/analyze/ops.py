"""The op table: per operator name, host and device time, FLOPs, bytes, roofline class.

- self host time: the op's duration minus its direct child ops' on the same thread;
- device time: kernels, copies and fills the op launched, tied by the "External id" the
  profiler stamps on the op, its runtime calls and their device activity (through the
  launch's correlation id when the device event lacks it), credited to the innermost op;
- achieved FLOP/s and bytes/s over device time, or over total host time on a CPU op;
- bound: "overhead" when a call averages under OVERHEAD_CALL_US (the op is too small for its
  dispatch/launch cost); else against the roofline ridge point peak_flops / bandwidth:
  intensity above it is "compute", below it "memory". The peak is the highest the ceilings
  list (dtype is not tracked per op), so the ridge is conservative: ops near it read memory.
"""

from __future__ import annotations

import numpy as np

from torchdoctor.analyze.devices import CeilingsLike
from torchdoctor.analyze.records import OpRow
from torchdoctor.analyze.timeline import DEVICE_KINDS, Kind, Timeline

# A CUDA kernel launch costs ~5-10 us of host time (PyTorch performance tuning guide; our
# launch statistics on the reference traces agree), so an op averaging under 10 us per call
# is dominated by dispatch and launch overhead, not by its math or memory traffic.
OVERHEAD_CALL_US = 10.0


def self_times(tl: Timeline, idx: np.ndarray) -> np.ndarray:
    """Self time of the given (cpu_op) events: duration minus direct children's durations.

    A stack walk per thread in (ts, -dur) order; the columns are turned into Python lists
    first because indexing a list is several times cheaper than indexing a numpy array.
    """
    order = idx[np.lexsort((-tl.dur[idx], tl.ts[idx], tl.tid[idx], tl.pid[idx]))]
    self_t = tl.dur[order].tolist()
    ts, end, dur = tl.ts[order].tolist(), tl.end[order].tolist(), tl.dur[order].tolist()
    pid, tid = tl.pid[order].tolist(), tl.tid[order].tolist()
    stack: list[int] = []
    last_thread: tuple[int, int] | None = None
    for k in range(len(self_t)):
        thread = (pid[k], tid[k])
        if thread != last_thread:
            stack.clear()
            last_thread = thread
        start = ts[k]
        while stack and end[stack[-1]] <= start:
            stack.pop()
        if stack:
            self_t[stack[-1]] -= dur[k]
        stack.append(k)
    out = tl.dur.copy()
    out[order] = self_t
    return np.clip(out[idx], 0.0, None)


def device_time_per_op(tl: Timeline, ops: np.ndarray) -> np.ndarray:
    """Device time credited to each op in `ops` (indices of cpu_op events)."""
    dev = np.flatnonzero(tl.mask(*DEVICE_KINDS))
    ext = tl.ext_id[dev].copy()
    missing = ext < 0
    if missing.any():  # recover the External id through the launching runtime call
        rt = np.flatnonzero(tl.mask(Kind.RUNTIME) & (tl.corr >= 0) & (tl.ext_id >= 0))
        order = np.argsort(tl.corr[rt])
        rt_corr, rt_ext = tl.corr[rt][order], tl.ext_id[rt][order]
        pos = np.clip(np.searchsorted(rt_corr, tl.corr[dev[missing]]), 0, max(rt.size - 1, 0))
        found = rt.size > 0
        hit = found & (rt_corr[pos] == tl.corr[dev[missing]]) if found else missing[missing]
        ext_missing = np.full(int(missing.sum()), -1, dtype=np.int64)
        if found:
            ext_missing[hit] = rt_ext[pos][hit]
        ext[missing] = ext_missing
    op_ext = tl.ext_id[ops]
    order = np.argsort(op_ext)
    sorted_ext = op_ext[order]
    out = np.zeros(ops.size)
    if ops.size == 0:
        return out
    pos = np.clip(np.searchsorted(sorted_ext, ext), 0, ops.size - 1)
    hit = (ext >= 0) & (sorted_ext[pos] == ext)
    np.add.at(out, order[pos[hit]], tl.dur[dev[hit]])
    return out


def _bound(
    count: int, time_us: float, intensity: float | None, ceilings: CeilingsLike | None
) -> str | None:
    if count and time_us / count < OVERHEAD_CALL_US:
        return "overhead"
    if intensity is None or ceilings is None or not ceilings.peak_flops:
        return None
    bandwidth = ceilings.mem_bandwidth_bytes_per_s
    if not bandwidth:
        return None
    ridge = max(ceilings.peak_flops.values()) / bandwidth
    return "compute" if intensity >= ridge else "memory"


def op_table(tl: Timeline, ceilings: CeilingsLike | None, top: int | None = None) -> list[OpRow]:
    """Rows per op name, heaviest first (device time, then total host time)."""
    ops = np.flatnonzero(tl.mask(Kind.CPU_OP))
    if ops.size == 0:
        return []
    self_t = self_times(tl, ops)
    dev_t = device_time_per_op(tl, ops)
    # Per-name sums with bincount: it adds weights in index order, the same order (and so
    # the same float result) as a Python loop over the ops; NaN FLOPs/bytes add 0.0.
    names = tl.name_id[ops]
    uniq, first = np.unique(names, return_index=True)
    uniq = uniq[np.argsort(first)]  # rows in order of first appearance
    size = int(uniq.max()) + 1
    flops, nbytes = tl.flops[ops], tl.nbytes[ops]
    has_f, has_b = ~np.isnan(flops), ~np.isnan(nbytes)

    def per_name(weights: np.ndarray | None) -> list[float]:
        return np.bincount(names, weights=weights, minlength=size)[uniq].tolist()

    acc = zip(
        uniq.tolist(),
        per_name(None),
        per_name(self_t),
        per_name(tl.dur[ops]),
        per_name(dev_t),
        per_name(np.where(has_f, flops, 0.0)),
        per_name(has_f.astype(np.float64)),
        per_name(np.where(has_b, nbytes, 0.0)),
        per_name(has_b.astype(np.float64)),
        strict=True,
    )
    rows: list[OpRow] = []
    for name_id, count, self_us, total_us, dev_us, f_sum, nf, b_sum, nb in acc:
        flops_v = f_sum if nf else None
        bytes_v = b_sum if nb else None
        time_us = dev_us if dev_us > 0 else total_us
        seconds = time_us * 1e-6
        intensity = flops_v / bytes_v if flops_v is not None and bytes_v else None
        rows.append(
            OpRow(
                name=tl.names[name_id],
                count=int(count),
                self_host_us=self_us,
                total_host_us=total_us,
                device_us=dev_us,
                flops=flops_v,
                bytes=bytes_v,
                intensity=intensity,
                achieved_flops_per_s=flops_v / seconds if flops_v and seconds > 0 else None,
                achieved_bytes_per_s=bytes_v / seconds if bytes_v and seconds > 0 else None,
                bound=_bound(int(count), time_us, intensity, ceilings),
            )
        )
    rows.sort(key=lambda r: (r.device_us, r.self_host_us), reverse=True)
    return rows[:top] if top else rows
