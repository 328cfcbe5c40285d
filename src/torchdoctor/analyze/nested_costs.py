"""Costs an op's own record cannot give, taken from the op that encloses it.

torch < 1.11 splits a convolution's backward into a backend op (aten::cudnn_convolution_backward
and its MIOpen twin) that calls *_backward_input and *_backward_weight. The weight-grad op
takes (weight_size, grad_output, input): the profiler records no shape for an int list, so the
kernel size, and with it the op's FLOPs, is in none of its recorded inputs. Its enclosing
backend op records input, grad_output and weight, and `shapes` counts it for both gradients
(`LEGACY_CONV_BACKWARD_GRADS`); the weight gradient is one of them, a convolution of the
forward's size (torch.utils.flop_counter's conv_backward_flop). Without this, the weight-grad
op, about a quarter of a 2021 ResNet-50 trace's device time, had no roofline class.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from torchdoctor.analyze.shapes import (
    LEGACY_CONV_BACKWARD_GRADS,
    LEGACY_CONV_BACKWARD_OPS,
    LEGACY_CONV_BACKWARD_WEIGHT_OPS,
)
from torchdoctor.analyze.timeline import Kind


def _named(names: list[str], name_id: npt.NDArray[np.int32], wanted: frozenset[str]) -> np.ndarray:
    hits = np.array([n in wanted for n in names] or [False], dtype=bool)
    return hits[name_id] if names else np.zeros(name_id.size, dtype=bool)


def inherit_weight_grad_flops(
    names: list[str],
    kind: npt.NDArray[np.int8],
    name_id: npt.NDArray[np.int32],
    pid: npt.NDArray[np.int64],
    tid: npt.NDArray[np.int64],
    ts: npt.NDArray[np.float64],
    dur: npt.NDArray[np.float64],
    flops: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """`flops` with each uncounted legacy weight-grad op given one gradient of the legacy
    backward op that encloses it on its thread (a copy; `flops` itself is left as it is)."""
    cpu = kind == int(Kind.CPU_OP)
    targets = np.flatnonzero(cpu & _named(names, name_id, LEGACY_CONV_BACKWARD_WEIGHT_OPS))
    targets = targets[np.isnan(flops[targets])]
    parents = np.flatnonzero(cpu & _named(names, name_id, LEGACY_CONV_BACKWARD_OPS))
    parents = parents[~np.isnan(flops[parents])]
    out = flops.copy()
    if targets.size == 0 or parents.size == 0:
        return out
    end = ts + dur
    for thread in {(int(p), int(t)) for p, t in zip(pid[targets], tid[targets], strict=True)}:
        on_thread = (pid == thread[0]) & (tid == thread[1])
        mine = targets[on_thread[targets]]
        theirs = parents[on_thread[parents]]
        theirs = theirs[np.argsort(ts[theirs], kind="stable")]
        if theirs.size == 0:
            continue
        # Legacy backward ops do not nest in one another: the last one to start at or before
        # the child is the only candidate, and it encloses the child if it ends after it.
        pos = np.searchsorted(ts[theirs], ts[mine], side="right") - 1
        ok = pos >= 0
        parent = theirs[np.clip(pos, 0, None)]
        ok &= end[parent] >= end[mine]
        out[mine[ok]] = flops[parent[ok]] / LEGACY_CONV_BACKWARD_GRADS
    return out
