"""Per-step samples of a trace: each ProfilerStep's length, its breakdown categories, and the
time of each op and kernel inside it, so that two traces can be compared step by step with an
interval (diagnose/diff.py) rather than by their averages alone.

An op belongs to the step whose window holds its start; its time is its self time (the
op table's, analyze/ops.py), so nested calls are not counted twice. A kernel belongs to the
step in which the runtime call that launched it started (same correlation id), as in
step_windows.py: device work runs after its step's host range ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from torchdoctor.analyze import intervals as iv
from torchdoctor.analyze.breakdown import step_shares
from torchdoctor.analyze.loading import load_rank_traces
from torchdoctor.analyze.ops import self_times
from torchdoctor.analyze.records import STEP_CATEGORIES
from torchdoctor.analyze.step_windows import is_step_name, step_windows
from torchdoctor.analyze.timeline import Kind, Timeline


@dataclass(frozen=True)
class StepSamples:
    """Microseconds per profiled step: the step, each category, each op and each kernel name.

    Every list has one value per step (an op absent from a step: 0). Empty without steps.
    """

    source: str
    step_us: list[float] = field(default_factory=list)
    categories: dict[str, list[float]] = field(default_factory=dict)
    ops: dict[str, list[float]] = field(default_factory=dict)
    kernels: dict[str, list[float]] = field(default_factory=dict)
    basis: str = "host"  # "device" when the trace has device activity


def _step_of(windows: iv.Intervals, points: np.ndarray) -> np.ndarray:
    """The index of the step window holding each point; -1 outside every window."""
    starts, ends = windows
    idx = np.searchsorted(starts, points, side="right") - 1
    safe = np.clip(idx, 0, None)
    inside = (idx >= 0) & (points <= ends[safe])
    return np.where(inside, idx, -1)


def _per_step(
    tl: Timeline, events: np.ndarray, steps: np.ndarray, values: np.ndarray, n: int
) -> dict[str, list[float]]:
    """values summed per (name, step) for the events that fall in a step."""
    keep = steps >= 0
    events, steps, values = events[keep], steps[keep], values[keep]
    if events.size == 0:
        return {}
    names, inverse = np.unique(tl.name_id[events], return_inverse=True)
    table = np.zeros((names.size, n))
    np.add.at(table, (inverse, steps), values)
    return {tl.names[int(k)]: row.tolist() for k, row in zip(names, table, strict=True)}


def _launch_times(tl: Timeline, kernels: np.ndarray) -> np.ndarray:
    """When the runtime call that launched each kernel started (the kernel's own start when
    no launch links to it)."""
    rt = np.flatnonzero(tl.mask(Kind.RUNTIME) & (tl.corr >= 0))
    out = tl.ts[kernels].copy()
    if rt.size == 0:
        return out
    order = np.argsort(tl.corr[rt], kind="stable")
    corr, ts = tl.corr[rt][order], tl.ts[rt][order]
    pos = np.clip(np.searchsorted(corr, tl.corr[kernels]), 0, rt.size - 1)
    hit = (tl.corr[kernels] >= 0) & (corr[pos] == tl.corr[kernels])
    out[hit] = ts[pos][hit]
    return out


def timeline_step_samples(tl: Timeline) -> StepSamples:
    """The per-step samples of one timeline (one rank)."""
    windows = step_windows(tl)
    has_device = bool(tl.mask(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET).any())
    basis = "device" if has_device else "host"
    n = int(windows[0].size)
    if n == 0:
        return StepSamples(source=tl.meta.source, basis=basis)
    spans = windows[1] - windows[0]
    shares = step_shares(tl, windows)
    categories = {name: (shares[:, j] * spans).tolist() for j, name in enumerate(STEP_CATEGORIES)}
    ops = np.flatnonzero(tl.mask(Kind.CPU_OP) & ~tl.name_mask(is_step_name))
    op_steps = _step_of(windows, tl.ts[ops])
    kernels = np.flatnonzero(tl.mask(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET))
    kernel_steps = _step_of(windows, _launch_times(tl, kernels))
    return StepSamples(
        source=tl.meta.source,
        step_us=spans.tolist(),
        categories=categories,
        ops=_per_step(tl, ops, op_steps, self_times(tl, ops), n),
        kernels=_per_step(tl, kernels, kernel_steps, tl.dur[kernels], n),
        basis=basis,
    )


def trace_step_samples(path: str | Path) -> StepSamples:
    """The per-step samples of a trace file (the lowest rank of a folder of traces).

    Raises `TraceError` for unreadable input.
    """
    return timeline_step_samples(load_rank_traces(path)[0])
