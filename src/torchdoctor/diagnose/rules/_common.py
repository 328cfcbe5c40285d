"""Helpers several rules share: the shares of step time a fix can address."""

from __future__ import annotations

from torchdoctor.core.gpu import older_than_ampere
from torchdoctor.diagnose.evidence import Evidence


def compute_share(ev: Evidence) -> float | None:
    """Share of step time spent computing the model (forward + backward).

    From measured phases when there are any; from a GPU trace, the device's computation
    share; from a CPU-only trace, the share of the step the host spent in operators.
    """
    fwd, bwd = ev.phase("forward"), ev.phase("backward")
    if fwd is not None and bwd is not None:
        return fwd + bwd
    if ev.trace is not None:
        if ev.trace.has_device and ev.trace.computation_pct is not None:
            return ev.trace.computation_pct / 100.0
        if ev.trace.step_breakdown:
            return ev.trace.step_breakdown.get("CPU Exec", 0.0)
    return None


def data_wait_share(ev: Evidence) -> float | None:
    """Share of step time waiting for the next batch."""
    wait = ev.phase("data_wait")
    if wait is not None:
        return wait
    if ev.trace is not None and ev.trace.step_breakdown:
        return ev.trace.step_breakdown.get("DataLoader", 0.0)
    return None


def bound_share(ev: Evidence, bound: str) -> float:
    """Fraction of operator time the roofline classed as `bound` (0 without a trace)."""
    if ev.trace is None:
        return 0.0
    return ev.trace.time_by_bound.get(bound, 0.0)  # type: ignore[call-overload]


def knob_default_workers(usable_cores: int | None) -> int:
    """A starting worker count: one per core left after the training process's own, at
    least one, at most four (PyTorch's performance tuning guide suggests starting at four)."""
    cores = usable_cores or 1
    return max(1, min(4, cores - 1 if cores > 2 else cores))


def pre_ampere_gpu(ev: Evidence) -> tuple[int, int] | None:
    """The CUDA GPU's capability when it is known and older than Ampere (sm_80), else None.

    Such a GPU has no bf16 or TF32 tensor cores, so the knobs refuse `precision=bf16` and
    `tf32=true` there and a rule must not prescribe them. The threshold is the one the knob
    catalogue uses (`torchdoctor.core.gpu`, torch-free, so diagnosing a trace needs no torch).
    """
    return older_than_ampere(ev.device, ev.cuda_capability)


def unexplained_idle_share(ev: Evidence) -> float:
    """The device idle share of a GPU trace that no other cause explains: minus the step
    time the host spent in the DataLoader with nothing running on the device (the step
    breakdown counts DataLoader only where no kernel, copy or runtime call covers it) and
    minus the idle the sync points left (`sync_cost_share`)."""
    tr = ev.trace
    if tr is None or tr.idle_pct is None:
        return 0.0
    explained = tr.step_breakdown.get("DataLoader", 0.0) + (tr.sync_cost_share or 0.0)
    return max(0.0, tr.idle_pct / 100.0 - explained)
