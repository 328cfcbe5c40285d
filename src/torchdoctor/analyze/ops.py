"""The op table: per operator name, host and device time, FLOPs, bytes, roofline class.

- self host time: the op's duration minus its direct child ops' on the same thread;
- device time: kernels, copies and fills the op launched, tied by the "External id" the
  profiler stamps on the op, its runtime calls and their device activity (through the
  launch's correlation id when the device event lacks it), credited to the innermost op;
- achieved FLOP/s and bytes/s over device time, or over total host time on a CPU op;
- bound: "overhead" when a call averages under OVERHEAD_CALL_US (the op is too small for its
  dispatch/launch cost); else the roofline: "compute" when the op's FLOPs at the peak of its
  dtype take at least as long as its bytes at the memory bandwidth (sum over calls of
  flops / peak[dtype] >= bytes / bandwidth; for one dtype, intensity >= the ridge
  peak / bandwidth), else "memory".

The peak of a call is that of its dtype, read from the trace's "Input type" (the first
floating-point input), with two rules: a float32 convolution uses the "tf32" peak when the
ceilings list one, because PyTorch lets cuDNN use TF32 by default
(torch.backends.cudnn.allow_tf32 = True) while float32 matmuls do not use it
(torch.backends.cuda.matmul.allow_tf32 = False since 1.12; PyTorch docs, "TensorFloat-32
(TF32) on Ampere (and later) devices"); a call whose dtype is not recorded (no
record_shapes) or has no peak in the ceilings is placed against FALLBACK_DTYPE, PyTorch's
default dtype, or the highest peak when the ceilings lack it; `fallback_note` says so.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from torchdoctor.analyze.devices import CeilingsLike
from torchdoctor.analyze.records import OpRow
from torchdoctor.analyze.shapes import CONV_OPS, OP_DTYPES
from torchdoctor.analyze.timeline import DEVICE_KINDS, Kind, Timeline

# A CUDA kernel launch costs ~5-10 us of host time (PyTorch performance tuning guide; our
# launch statistics on the reference traces agree), so an op averaging under 10 us per call
# is dominated by dispatch and launch overhead, not by its math or memory traffic.
OVERHEAD_CALL_US = 10.0
# The peak for calls of unknown dtype: torch.get_default_dtype() is float32 unless changed.
FALLBACK_DTYPE = "float32"
# OpRow.dtype / peak_dtype of a row whose calls differ.
MIXED = "mixed"
_FLOAT32 = OP_DTYPES.index("float32")


def self_times(tl: Timeline, idx: np.ndarray) -> np.ndarray:
    """Self time of the given (cpu_op) events: duration minus direct children's durations.

    A stack walk per thread in (ts, -dur) order; the columns are turned into Python lists
    first because indexing a list is several times cheaper than indexing a numpy array.
    """
    order = idx[np.lexsort((-tl.dur[idx], tl.ts[idx], tl.tid[idx], tl.pid[idx]))]
    self_t = tl.dur[order].tolist()
    pid, tid = tl.pid[order], tl.tid[order]
    new_thread = np.ones(order.size, dtype=bool)
    new_thread[1:] = (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])
    starts, ends = tl.ts[order].tolist(), tl.end[order].tolist()
    rows = zip(starts, ends, self_t.copy(), new_thread.tolist(), strict=True)
    stack: list[int] = []  # open calls on this thread, innermost last
    stack_end: list[float] = []  # their ends, kept beside them to skip an indexing step
    for k, (start, stop, dur, new) in enumerate(rows):
        if new:
            stack.clear()
            stack_end.clear()
        while stack_end and stack_end[-1] <= start:
            stack_end.pop()
            stack.pop()
        if stack:
            self_t[stack[-1]] -= dur
        stack.append(k)
        stack_end.append(stop)
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


def fallback_peak(peaks: Mapping[str, float]) -> str:
    """The peak used for a call whose dtype is unknown or has no peak of its own."""
    return FALLBACK_DTYPE if FALLBACK_DTYPE in peaks else max(peaks, key=peaks.__getitem__)


def peak_keys(
    tl: Timeline, ops: np.ndarray, peaks: Mapping[str, float]
) -> tuple[list[str], np.ndarray]:
    """The ceilings key each op call in `ops` is placed against (module docstring), as a key
    list and one index into it per call."""
    keys = list(peaks)
    fallback = keys.index(fallback_peak(peaks))
    by_code = np.array([fallback, *(keys.index(d) if d in peaks else fallback for d in OP_DTYPES)])
    codes = tl.dtype[ops]
    idx = by_code[codes.astype(np.int64) + 1]
    if "tf32" in peaks:
        conv = tl.name_mask(CONV_OPS.__contains__)[ops] & (codes == _FLOAT32)
        idx[conv] = keys.index("tf32")
    return keys, idx


def _distinct_pairs(
    names: np.ndarray, values: np.ndarray, labels: list[str]
) -> dict[int, set[str]]:
    """Per name id, the set of labels[value] its calls take (one pass in numpy)."""
    width = max(len(labels), 1)
    pairs = np.sort(names.astype(np.int64) * width + values)
    if pairs.size:
        pairs = pairs[np.concatenate(([True], pairs[1:] != pairs[:-1]))]
    out: dict[int, set[str]] = {}
    for pair in pairs.tolist():
        out.setdefault(pair // width, set()).add(labels[pair % width])
    return out


def _one_or_mixed(values: set[str]) -> str | None:
    return None if not values else values.pop() if len(values) == 1 else MIXED


def _bound(
    count: int,
    time_us: float,
    compute_s: float | None,
    bytes_v: float | None,
    bandwidth: float | None,
) -> str | None:
    """The row's class; `compute_s` is its FLOPs' time at the peaks (None: no roofline)."""
    if count and time_us / count < OVERHEAD_CALL_US:
        return "overhead"
    if compute_s is None or not bytes_v or not bandwidth:
        return None
    return "compute" if compute_s >= bytes_v / bandwidth else "memory"


def fallback_note(rows: list[OpRow], ceilings: CeilingsLike | None) -> str | None:
    """Why some rows were placed against the fallback peak, or None when none were."""
    if ceilings is None or not ceilings.peak_flops or not ceilings.mem_bandwidth_bytes_per_s:
        return None
    peaks = ceilings.peak_flops
    unknown = [r for r in rows if r.flops is not None and r.dtype is None]
    absent = [r for r in rows if r.flops is not None and r.dtype not in (None, MIXED, *peaks)]
    if not unknown and not absent:
        return None
    fallback = fallback_peak(peaks)
    why = (
        "PyTorch's default dtype"
        if fallback == FALLBACK_DTYPE
        else f"the highest listed: the ceilings have no {FALLBACK_DTYPE} peak"
    )
    parts = []
    if unknown:
        parts.append(f"{len(unknown)} op(s) with FLOPs but no recorded floating-point dtype")
    if absent:
        dtypes = ", ".join(sorted({str(r.dtype) for r in absent}))
        parts.append(f"{len(absent)} op(s) in a dtype the ceilings give no peak for ({dtypes})")
    return f"{' and '.join(parts)} placed against the {fallback} peak ({why})"


def op_table(
    tl: Timeline,
    ceilings: CeilingsLike | None,
    top: int | None = None,
    *,
    self_t: np.ndarray | None = None,
) -> list[OpRow]:
    """Rows per op name, heaviest first (device time, then total host time).

    `self_t`: the cpu_op events' self times, in event order, when already computed.
    """
    ops = np.flatnonzero(tl.mask(Kind.CPU_OP))
    if ops.size == 0:
        return []
    if self_t is None:
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

    peaks = ceilings.peak_flops if ceilings is not None else {}
    bandwidth = ceilings.mem_bandwidth_bytes_per_s if ceilings is not None else None
    compute: list[float] | list[None] = [None] * uniq.size
    roofs: dict[int, set[str]] = {}
    if peaks and bandwidth:
        keys, key_idx = peak_keys(tl, ops, peaks)
        # Seconds each call's FLOPs take at its dtype's peak; the per-name sum decides.
        peak_of_call = np.asarray([peaks[k] for k in keys])[key_idx]
        compute = per_name(np.where(has_f, flops, 0.0) / peak_of_call)
        roofs = _distinct_pairs(names[has_f], key_idx[has_f], keys)
    codes = tl.dtype[ops].astype(np.int64)
    known = codes >= 0
    dtypes = _distinct_pairs(names[known], codes[known], list(OP_DTYPES))

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
        compute,
        strict=True,
    )
    rows: list[OpRow] = []
    for name_id, count, self_us, total_us, dev_us, f_sum, nf, b_sum, nb, compute_s in acc:
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
                bound=_bound(
                    int(count),
                    time_us,
                    compute_s if intensity is not None else None,
                    bytes_v,
                    bandwidth,
                ),
                dtype=_one_or_mixed(dtypes.get(name_id, set())),
                peak_dtype=_one_or_mixed(roofs.get(name_id, set())),
            )
        )
    rows.sort(key=lambda r: (r.device_us, r.self_host_us), reverse=True)
    return rows[:top] if top else rows
