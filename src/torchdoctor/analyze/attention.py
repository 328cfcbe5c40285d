"""Attention written by hand: matmul, softmax, matmul on matching shapes in a trace.

`scores = q @ k.transpose(-2, -1); p = softmax(scores); y = p @ v` issues, on the host thread
that runs the forward, a top-level `aten::matmul` (or `aten::bmm`), an `aten::softmax`, and a
second top-level matmul, in that order, with elementwise ops (scale, mask, dropout) between
them. The two products have the same FLOPs when the value width equals the key width (q k^T:
2*B*H*T*S*d; p v: 2*B*H*T*S*d_v), which the decoder estimates from the recorded shapes. A
softmax between two products of different sizes (a classifier's output feeding a loss) is not
attention, and neither is a matmul inside another operator (`aten::linear` on a 3-d input
calls matmul): only operators no other operator encloses on their thread count.

`scaled_dot_product_attention` replaces the three (and the mask) with one fused kernel that
never writes the (T, S) scores out: that is the prescription (diagnose/rules/
handwritten_attention.py).
"""

from __future__ import annotations

from typing import Final

import numpy as np

from torchdoctor.analyze.records import AttentionStats
from torchdoctor.analyze.step_windows import is_step_name
from torchdoctor.analyze.timeline import Kind, Timeline

MATMUL_OPS: Final = frozenset({"aten::matmul", "aten::bmm"})
SOFTMAX_OPS: Final = frozenset({"aten::softmax", "aten::_softmax", "aten::_safe_softmax"})
#: Relative FLOP difference under which the two products are "the same size": the decoder's
#: estimates are exact products of the recorded dimensions, so equal shapes give equal counts
#: and the tolerance only absorbs float rounding.
SAME_FLOPS_RTOL: Final = 1e-6


def _top_level(tl: Timeline, ops: np.ndarray) -> np.ndarray:
    """The ops of `ops` (indices) that no other op of `ops` on the same thread encloses, in
    start order per thread (threads one after another)."""
    order = ops[np.lexsort((-tl.dur[ops], tl.ts[ops], tl.tid[ops], tl.pid[ops]))]
    ends = tl.end[order]
    thread = tl.pid[order] * (1 << 32) + tl.tid[order]
    keep = np.ones(order.size, dtype=bool)
    for t in np.unique(thread):
        at = np.flatnonzero(thread == t)
        before = np.maximum.accumulate(ends[at])
        # An op that ends no later than some earlier-starting op is inside it.
        keep[at[1:]] = ends[at[1:]] > before[:-1]
    return order[keep]


def handwritten_attention(tl: Timeline, step_count: int | None) -> AttentionStats | None:
    """The hand-written attention blocks in `tl` (None when the trace has none, or has no
    shapes to match them by)."""
    step_ops = tl.name_mask(is_step_name)
    cpu = np.flatnonzero(tl.mask(Kind.CPU_OP) & ~step_ops)
    if cpu.size == 0:
        return None
    is_mm = tl.name_mask(lambda n: n in MATMUL_OPS)
    is_sm = tl.name_mask(lambda n: n in SOFTMAX_OPS)
    top = _top_level(tl, cpu)
    seq = top[is_mm[top] | is_sm[top]]
    if seq.size < 3:
        return None
    mm, sm = is_mm[seq], is_sm[seq]
    thread = tl.pid[seq] * (1 << 32) + tl.tid[seq]
    first, middle, last = seq[:-2], seq[1:-1], seq[2:]
    fa, fb = tl.flops[first], tl.flops[last]
    with np.errstate(invalid="ignore"):
        same = np.abs(fa - fb) <= SAME_FLOPS_RTOL * np.maximum(fa, fb)
        hit = mm[:-2] & sm[1:-1] & mm[2:] & (thread[:-2] == thread[2:]) & (fa > 0) & same
    blocks = int(hit.sum())
    time_us = float((tl.dur[first] + tl.dur[middle] + tl.dur[last])[hit].sum())
    flops = float((fa + fb)[hit].sum())
    if blocks == 0:
        return None
    return AttentionStats(
        blocks=blocks,
        per_step=blocks / step_count if step_count else None,
        time_us=time_us,
        flops=flops,
    )
