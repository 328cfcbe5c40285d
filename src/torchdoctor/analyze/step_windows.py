"""ProfilerStep windows, and which device activity belongs to the profiled steps.

`torch.profiler.profile(schedule=...)` marks each active step with a `ProfilerStep#N` range on
the host (category user_annotation, or cpu_op in older traces). Device work is asynchronous,
so a step's kernels may run after the step's host range ends; we tie device activity to the
steps through the launch: an activity belongs to the profiled steps when the runtime call that
launched it (same correlation id) started inside a ProfilerStep window. This reproduces
TraceLens's window on its reference traces (it uses the device-side projection of the step
annotation) and also works on traces without that projection (ROCm, older CUDA).
"""

from __future__ import annotations

import numpy as np

from torchdoctor.analyze import intervals as iv
from torchdoctor.analyze.timeline import DEVICE_KINDS, BoolArray, Kind, Timeline

STEP_PREFIX = "ProfilerStep#"


def is_step_name(name: str) -> bool:
    return name.startswith(STEP_PREFIX)


def step_windows(tl: Timeline) -> iv.Intervals:
    """Host ProfilerStep ranges, sorted by start (one per step)."""
    m = tl.name_mask(is_step_name) & tl.mask(Kind.USER_ANNOTATION, Kind.CPU_OP)
    if not m.any():
        return iv.empty()
    starts, ends = tl.ts[m], tl.end[m]
    order = np.argsort(starts, kind="stable")
    return starts[order], ends[order]


def in_windows(windows: iv.Intervals, points: np.ndarray) -> BoolArray:
    """Whether each point lies inside one of the (sorted) windows."""
    if windows[0].size == 0:
        return np.zeros(points.shape, dtype=bool)
    idx = np.searchsorted(windows[0], points, side="right") - 1
    safe = np.clip(idx, 0, None)
    return (idx >= 0) & (points <= windows[1][safe])


def _isin(values: np.ndarray, members: np.ndarray) -> BoolArray:
    """np.isin for int64 ids by binary search in the sorted members. Correlation ids span a
    wide range, where np.isin sorts values and members together; this cut
    `device_activity_in_steps` from 0.12 s to 0.08 s on the 336k-event benchmark trace.
    Sorted, not np.unique'd: duplicates do not disturb the search, and np.unique imports
    numpy.ma on first use (~15 ms of start-up)."""
    keys = np.sort(members)
    if keys.size == 0:
        return np.zeros(values.shape, dtype=bool)
    pos = np.searchsorted(keys, values).clip(0, keys.size - 1)
    return keys[pos] == values


def device_activity_in_steps(tl: Timeline, windows: iv.Intervals) -> BoolArray:
    """Mask of device activity launched inside the step windows; all of it without steps.

    Falls back to all device activity when the trace has no steps, or when no launch could
    be linked (a trace without correlation ids).
    """
    dev = tl.mask(*DEVICE_KINDS)
    if windows[0].size == 0 or not dev.any():
        return dev
    launch = tl.mask(Kind.RUNTIME) & (tl.corr >= 0) & in_windows(windows, tl.ts)
    selected = dev & _isin(tl.corr, tl.corr[launch]) & (tl.corr >= 0)
    return selected if selected.any() else dev
