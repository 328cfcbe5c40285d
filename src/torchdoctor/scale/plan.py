"""A scaling study's plan from what was asked: every check a study needs before its first job.

`check_request` holds the checks that need nothing but the request (no torch, no network):
they run before `scale` prints the commands of several nodes. `plan_study` then chooses the
backend, the threads per rank and the warnings, checks the batch split and the rendezvous, and
returns the `StudyPlan` that `run_worlds` runs. Every refusal is one line (exit 2).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from torchdoctor.core.errors import UsageError
from torchdoctor.scale.launch import (
    Topology,
    check_backend,
    check_rendezvous,
    parse_endpoint,
    warn_oversubscribed,
)
from torchdoctor.scale.runner import StudyPlan
from torchdoctor.scale.worlds import SCALING_MODES, ScalingMode


def check_request(
    *,
    workload: str | None,
    script: Sequence[str],
    mode: str,
    job_timeout_s: float,
    nnodes: int,
    rdzv_endpoint: str | None,
) -> None:
    """The request's own consistency: something to scale, a known mode, a positive timeout,
    and for several nodes a rendezvous to meet at."""
    if workload is None and not script:
        raise UsageError("nothing to scale", hint="torchdoctor scale mlp --nproc 1,2")
    if mode not in SCALING_MODES:
        raise UsageError(f"unknown --mode {mode!r}", hint="weak or strong")
    if script and mode == "strong":
        raise UsageError("a script chooses its own batch: --mode strong is for workloads")
    if job_timeout_s <= 0:
        raise UsageError(f"--job-timeout must be positive, got {job_timeout_s:g}")
    if nnodes < 1:
        raise UsageError(f"--nnodes must be at least 1, got {nnodes}")
    if nnodes > 1 and rdzv_endpoint is None:
        raise UsageError("several nodes need --rdzv-endpoint HOST:PORT")
    if rdzv_endpoint is not None:
        parse_endpoint(rdzv_endpoint)


def usable_cores() -> int:
    """The cores this process may run on (its affinity), else the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def plan_study(
    *,
    nprocs: Sequence[int],
    workload: str | None,
    script: Sequence[str],
    mode: str,
    batch: int,
    steps: int,
    threads: int | None,
    backend: str | None,
    quick: bool,
    project_to: Sequence[int],
    bandwidths: Sequence[float],
    nnodes: int,
    node_rank: int | None,
    rdzv_endpoint: str | None,
    local_addr: str | None,
    bench_sizes: Sequence[int],
    job_timeout_s: float,
) -> StudyPlan:
    """The plan of this node's part of the study (`check_request` first).

    The backend: the one given, else NCCL with a GPU (one per rank) and gloo without. The
    threads per rank: the ones given, else this node's cores shared by the largest world on
    it, the same at every N so that N alone changes. N larger than the cores is warned of,
    not refused: a study may want to see it.
    """
    import torch

    check_request(
        workload=workload,
        script=script,
        mode=mode,
        job_timeout_s=job_timeout_s,
        nnodes=nnodes,
        rdzv_endpoint=rdzv_endpoint,
    )
    if node_rank is not None and not 0 <= node_rank < nnodes:
        raise UsageError(f"--node-rank must be in 0..{nnodes - 1}, got {node_rank}")
    chosen = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    check_backend(chosen)
    if chosen == "nccl" and max(nprocs) > torch.cuda.device_count():
        raise UsageError(
            f"NCCL needs one GPU per rank: --nproc {max(nprocs)} on "
            f"{torch.cuda.device_count()} GPU(s)",
            hint="lower --nproc, or use --backend gloo",
        )
    per_rank = threads if threads is not None else max(1, usable_cores() // max(nprocs))
    if per_rank < 1:
        raise UsageError(f"--threads must be at least 1, got {per_rank}")
    warnings = [w for n in nprocs if (w := warn_oversubscribed(n, per_rank))]
    scaling: ScalingMode = "strong" if mode == "strong" else "weak"
    plan = StudyPlan(
        nprocs=list(nprocs),
        workload=workload,
        script=list(script),
        mode=scaling,
        batch=batch,
        steps=steps,
        threads=per_rank,
        backend=chosen,
        quick=quick,
        project_to=list(project_to),
        bandwidths=list(bandwidths),
        nnodes=nnodes,
        node_rank=node_rank or 0,
        rdzv_endpoint=rdzv_endpoint,
        local_addr=local_addr,
        bench_sizes=list(bench_sizes),
        job_timeout_s=job_timeout_s,
        warnings=list(dict.fromkeys(warnings)),
    )
    for n in nprocs:
        plan.per_rank_batch(n * nnodes)  # refuse a batch strong scaling cannot split, up front
    check_rendezvous(Topology(nprocs[0], nnodes, plan.node_rank, rdzv_endpoint))
    return plan
