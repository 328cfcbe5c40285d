"""Kernel launch overhead: launch delay, kernels shorter than their launch, tiny kernels.

Each kernel is paired with the runtime call that launched it through the correlation id
(cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel, ...). Launch delay is kernel start minus
launch-call start: how long the kernel waited in the queue plus the launch latency. A kernel
shorter than its launch call means the host cannot keep the device fed: the job is
launch-bound, the case for CUDA graphs or fusion (torch.compile).
"""

from __future__ import annotations

import numpy as np

from torchdoctor.analyze.records import LaunchStats
from torchdoctor.analyze.timeline import Kind, Timeline

# Kernels under 10 us are comparable to their own launch cost (~5-10 us per launch on
# CUDA, PyTorch performance tuning guide), so time spent in them is mostly overhead.
TINY_KERNEL_US = 10.0


def _is_launch(name: str) -> bool:
    return "launch" in name.lower()


def match_launches(tl: Timeline, kernels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(kernel indices that have a launch call, their launch-call indices)."""
    rt = np.flatnonzero(tl.mask(Kind.RUNTIME) & (tl.corr >= 0) & tl.name_mask(_is_launch))
    if rt.size == 0 or kernels.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    order = np.argsort(tl.corr[rt])
    rt_sorted, rt_corr = rt[order], tl.corr[rt][order]
    pos = np.clip(np.searchsorted(rt_corr, tl.corr[kernels]), 0, rt.size - 1)
    hit = (tl.corr[kernels] >= 0) & (rt_corr[pos] == tl.corr[kernels])
    return kernels[hit], rt_sorted[pos[hit]]


def launch_stats(tl: Timeline, selected: np.ndarray) -> LaunchStats | None:
    """Launch statistics over the selected kernels; None on a trace without kernels."""
    kernels = np.flatnonzero(tl.mask(Kind.KERNEL) & selected)
    if kernels.size == 0:
        return None
    k_idx, l_idx = match_launches(tl, kernels)
    shorter = int(np.sum(tl.dur[k_idx] < tl.dur[l_idx]))
    delays = tl.ts[k_idx] - tl.ts[l_idx]
    delay = None
    if delays.size:
        p50, p90, p99 = np.percentile(delays, [50, 90, 99]).tolist()
        delay = {
            "p50": float(p50),
            "p90": float(p90),
            "p99": float(p99),
            "max": float(delays.max()),
            "mean": float(delays.mean()),
        }
    dur = tl.dur[kernels]
    tiny = dur < TINY_KERNEL_US
    total = float(dur.sum())
    return LaunchStats(
        kernels=int(kernels.size),
        launches_matched=int(k_idx.size),
        kernels_shorter_than_launch=shorter,
        kernels_shorter_than_launch_pct=100.0 * shorter / k_idx.size if k_idx.size else 0.0,
        launch_delay_us=delay,
        tiny_kernel_us=TINY_KERNEL_US,
        tiny_kernels_pct=100.0 * float(tiny.mean()),
        tiny_kernel_time_pct=100.0 * float(dur[tiny].sum()) / total if total > 0 else 0.0,
    )
