"""Step-time breakdown: where each ProfilerStep window's time went, each instant counted once.

Categories in priority order (`STEP_CATEGORIES`, as the PyTorch profiler's TensorBoard plugin
reports them): an instant covered by a kernel and by a runtime call counts as Kernel only.

- Kernel: computation kernels on the device (everything but memcpy/memset/communication);
- Memcpy, Memset: device copies and fills;
- Communication: NCCL/RCCL kernels on the device; on the host, collective calls
  (c10d / gloo / record_param_comms), which is where a CPU-only job communicates;
- Runtime: CUDA/HIP runtime and driver calls on the host (launches, syncs, allocations);
- DataLoader: host ranges whose name mentions DataLoader, i.e. waiting for the next batch;
- CPU Exec: other host operators (cpu_op);
- Other: the rest of the step (Python between ops, idle host).

On a CPU-only trace the device categories are zero and the host categories are the
breakdown ("the host equivalents").
"""

from __future__ import annotations

import numpy as np

from torchdoctor.analyze import intervals as iv
from torchdoctor.analyze.devicetime import is_comm_kernel_name
from torchdoctor.analyze.records import STEP_CATEGORIES, StepSummary
from torchdoctor.analyze.step_windows import is_step_name
from torchdoctor.analyze.timeline import BoolArray, Kind, Timeline

# Host ranges that are collective communication on CPU (Gloo) or the host side of NCCL.
HOST_COMM_MARKERS = ("c10d::", "gloo:", "nccl:", "record_param_comms", "allreduce", "all_reduce")
DATALOADER_MARKER = "dataloader"


def is_host_comm_name(name: str) -> bool:
    lowered = name.lower()
    return any(marker in lowered for marker in HOST_COMM_MARKERS)


def is_dataloader_name(name: str) -> bool:
    return DATALOADER_MARKER in name.lower()


def category_masks(tl: Timeline) -> dict[str, BoolArray]:
    """Events feeding each breakdown category (before the priority rule)."""
    kernel = tl.mask(Kind.KERNEL)
    comm_kernel = kernel & tl.name_mask(is_comm_kernel_name)
    host = tl.mask(Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)
    not_step = ~tl.name_mask(is_step_name)
    return {
        "Kernel": kernel & ~comm_kernel,
        "Memcpy": tl.mask(Kind.MEMCPY),
        "Memset": tl.mask(Kind.MEMSET),
        "Communication": comm_kernel
        | (tl.mask(Kind.CPU_OP, Kind.USER_ANNOTATION) & tl.name_mask(is_host_comm_name)),
        "Runtime": tl.mask(Kind.RUNTIME),
        "DataLoader": host & not_step & tl.name_mask(is_dataloader_name),
        "CPU Exec": tl.mask(Kind.CPU_OP) & not_step,
    }


def step_shares(tl: Timeline, windows: iv.Intervals) -> np.ndarray:
    """Each step's share of its window per category (steps x `STEP_CATEGORIES`), each instant
    counted once, for the first category in priority order that covers it."""
    starts, ends = windows
    unions = {
        name: iv.union(tl.ts[m], tl.end[m]) for name, m in category_masks(tl).items() if m.any()
    }
    shares = np.zeros((starts.size, len(STEP_CATEGORIES)))
    for i, (lo, hi) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        span = hi - lo
        if span <= 0:
            continue
        taken = iv.empty()
        for j, name in enumerate(STEP_CATEGORIES[:-1]):
            if name not in unions:
                continue
            piece = iv.subtract(iv.clip(unions[name], lo, hi), taken)
            shares[i, j] = iv.length(piece) / span
            taken = iv.union(
                np.concatenate((taken[0], piece[0])), np.concatenate((taken[1], piece[1]))
            )
        shares[i, -1] = max(0.0, 1.0 - shares[i, :-1].sum())
    return shares


def step_breakdown(
    tl: Timeline, windows: iv.Intervals
) -> tuple[dict[str, float] | None, StepSummary | None]:
    """Average % of step time per category over the step windows (None without steps)."""
    starts, ends = windows
    if starts.size == 0:
        return None, None
    shares = step_shares(tl, windows)
    valid = (ends - starts) > 0
    mean = shares[valid].mean(axis=0) * 100.0 if valid.any() else shares.mean(axis=0) * 100.0
    has_device = bool(tl.mask(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET).any())
    summary = StepSummary(
        count=int(starts.size),
        mean_us=float(np.mean(ends - starts)),
        basis="device" if has_device else "host",
    )
    return {name: float(v) for name, v in zip(STEP_CATEGORIES, mean, strict=True)}, summary


#: The iterator classes torch.utils.data names in its `enumerate(DataLoader)#<Iter>.__next__`
#: profiler spans: the single-process one means num_workers=0.
DATALOADER_ITERS = ("_SingleProcessDataLoaderIter", "_MultiProcessingDataLoaderIter")


def dataloader_iter(tl: Timeline) -> str | None:
    """The DataLoader iterator class the trace's __next__ spans name (the first seen)."""
    for name in tl.names:
        if is_dataloader_name(name):
            for cls in DATALOADER_ITERS:
                if cls in name:
                    return cls
    return None
