"""One rank of the collective microbenchmark: `torchrun ... -m torchdoctor.scale._rank_bench
OUT_DIR --backend gloo [--quick] [--sizes 1024,4096]` (see collectives.py for how it times)."""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

from torchdoctor.measure import summarize, synchronize
from torchdoctor.scale.collectives import (
    BENCH_ENV,
    BENCH_FILE,
    COLOCATION_BLOCK_S,
    COLOCATION_MAX_CALLS,
    COLOCATION_ROUNDS,
    FULL_SIZES,
    QUICK_COLOCATION_ROUNDS,
    QUICK_REPEATS,
    QUICK_SIZES,
    REPEATS,
    WARMUP_CALLS,
    CollectiveBench,
    ColocationProbe,
    point,
)
from torchdoctor.scale.fit import COLLECTIVES, Collective, fit_alpha_beta

_FLOAT_BYTES = 4
#: The generic kernel's sizes: a 256x256 product (compute-bound) and a sum over 4 Mi floats
#: (16 MiB, past a core's L2: memory-bound).
_GENERIC_MATMUL = 256
_GENERIC_STREAM = 4 * 1024 * 1024
Work = Callable[[], None]


def generic_work() -> Work:
    """The co-location probe's work when the job's own step is not at hand (a user's script)."""
    a = torch.randn(_GENERIC_MATMUL, _GENERIC_MATMUL)
    b = torch.randn(_GENERIC_MATMUL, _GENERIC_MATMUL)
    x, y = torch.ones(_GENERIC_STREAM), torch.ones(_GENERIC_STREAM)

    def work() -> None:
        for _ in range(4):
            torch.mm(a, b)
        x.add_(y)

    return work


def _block(work: Work, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        work()
    return (time.perf_counter() - start) / calls


def colocation(work: Work, label: str, rounds: int, device: torch.device) -> ColocationProbe:
    """Time `work` on rank 0 alone and on every rank at once, round after round (see
    collectives.py); every rank returns the same record."""
    rank, world = dist.get_rank(), dist.get_world_size()
    work()  # warm: the first call allocates and dispatches for the first time
    synchronize(device)
    one = torch.tensor([_block(work, 1)], dtype=torch.float64)
    dist.broadcast(one, src=0)  # every rank repeats the work as often as rank 0 needs
    calls = int(min(COLOCATION_MAX_CALLS, max(1, math.ceil(COLOCATION_BLOCK_S / float(one[0])))))
    alone, together = [], []
    for _ in range(rounds):
        dist.barrier()
        mine = torch.tensor([_block(work, calls) if rank == 0 else 0.0], dtype=torch.float64)
        dist.barrier()
        mine_together = torch.tensor([_block(work, calls)], dtype=torch.float64)
        both = torch.cat([mine, mine_together])
        dist.all_reduce(both)  # rank 0's alone (the others add 0), the ranks' sum together
        alone.append(float(both[0]))
        together.append(float(both[1]) / world)
    ratios = [t / a for t, a in zip(together, alone, strict=True)]
    slowdown = summarize(ratios, label="co-location slowdown")
    return ColocationProbe(
        work=label,
        calls_per_block=calls,
        alone=summarize(alone, label="alone"),
        together=summarize(together, label="together"),
        slowdown=slowdown.median,
        slowdown_ci=(slowdown.ci_low, slowdown.ci_high),
    )


def _operation(
    collective: Collective, size: int, world: int, device: torch.device
) -> Callable[[], None]:
    elements = max(world, size // _FLOAT_BYTES)
    if collective == "all_reduce":
        t = torch.ones(elements, device=device)
        return lambda: dist.all_reduce(t)
    if collective == "all_gather":
        # NCCL-tests' size for all-gather is the gathered whole; each rank brings 1/N of it
        out = torch.empty(elements // world * world, device=device)
        mine = torch.ones(elements // world, device=device)
        return lambda: dist.all_gather_into_tensor(out, mine)
    if collective == "reduce_scatter":
        # as NCCL-tests counts it too: the size is the whole each rank reduces, 1/N its output
        whole = torch.ones(elements // world * world, device=device)
        part = torch.empty(elements // world, device=device)
        return lambda: dist.reduce_scatter_tensor(part, whole)
    t = torch.ones(elements, device=device)

    def reduce_broadcast() -> None:
        dist.reduce(t, dst=0)
        dist.broadcast(t, src=0)

    return reduce_broadcast


def _time(
    op: Callable[[], None], repeats: int, device: torch.device
) -> tuple[list[float], list[float]]:
    """Per repeat: the slowest rank's time, and the ranks' mean CPU seconds (their processes'
    every thread: gloo's workers, the kernel's sockets)."""
    for _ in range(WARMUP_CALLS):
        op()
    synchronize(device)
    mine, cpu = [], []
    for _ in range(repeats):
        dist.barrier()
        start, cpu_start = time.perf_counter(), time.process_time()
        op()
        synchronize(device)
        mine.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
    # a repeat ends when its slowest rank is done
    times = torch.tensor(mine, dtype=torch.float64, device=device)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    cpus = torch.tensor(cpu, dtype=torch.float64, device=device)
    dist.all_reduce(cpus)
    world = dist.get_world_size()
    return [float(x) for x in times.cpu()], [float(x) / world for x in cpus.cpu()]


def threads_per_core() -> float | None:
    """This node's ranks' compute threads over its usable cores (None where unknown)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    if not cores or not local.isdigit():
        return None
    return int(local) * torch.get_num_threads() / cores


def bench(
    out_dir: Path,
    *,
    backend: str,
    quick: bool,
    sizes: list[int],
    work: tuple[str, Work] | None = None,
) -> None:
    """Time the co-location probe (`work`: a name and the job's own step; None: the generic
    kernel) and every collective at every size in the initialized default group; rank 0
    writes the record into `out_dir`."""
    world, rank = dist.get_world_size(), dist.get_rank()
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    sizes = sizes or list(QUICK_SIZES if quick else FULL_SIZES)
    repeats = QUICK_REPEATS if quick else REPEATS
    probe = None
    if device.type == "cpu":  # ranks on GPUs compute each on its own device
        label, step = work if work is not None else ("generic kernel", generic_work())
        rounds = QUICK_COLOCATION_ROUNDS if quick else COLOCATION_ROUNDS
        probe = colocation(step, label, rounds, device)
    points = []
    for collective in COLLECTIVES:
        for size in sizes:
            times, cpu = _time(_operation(collective, size, world, device), repeats, device)
            timed = summarize(times, label=collective)
            points.append(point(collective, world, size, timed, cpu_s=statistics.median(cpu)))
    fits = {
        c: fit_alpha_beta(
            c,
            world,
            [p.size_bytes for p in points if p.collective == c],
            [p.time.median for p in points if p.collective == c],
        )
        for c in COLLECTIVES
    }
    if rank == 0:
        CollectiveBench(
            world_size=world,
            backend=backend,
            device=str(device),
            points=points,
            fits=fits,
            colocation=probe,
            threads_per_core=threads_per_core() if device.type == "cpu" else None,
        ).write(out_dir / BENCH_FILE)
    dist.barrier()


def bench_if_asked(work: Callable[[], tuple[str, Work]] | None = None) -> None:
    """Run the benchmark first when the study asked for it (`BENCH_ENV`, set by the runner),
    in a process group of its own that is gone before the job's own starts: one torchrun
    launch per world size instead of two (each rank's start-up costs seconds of imports).
    `work` makes the co-location probe's work (a name, a call), built only when asked."""
    asked = os.environ.get(BENCH_ENV)
    if not asked:
        return
    plan = json.loads(asked)
    # Keys of its own in the job's store: a group made again over the same keys after this one
    # is destroyed reads this one's stale addresses (gloo: "connection refused").
    store, rank, world = next(dist.rendezvous("env://"))
    dist.init_process_group(
        plan["backend"],
        store=dist.PrefixStore("torchdoctor-bench/", store),
        rank=rank,
        world_size=world,
    )
    try:
        bench(
            Path(plan["out_dir"]),
            backend=plan["backend"],
            quick=plan["quick"],
            sizes=plan["sizes"],
            work=work() if work is not None and plan["backend"] == "gloo" else None,
        )
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--backend", default="gloo")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", default="")
    args = parser.parse_args(argv)
    dist.init_process_group(args.backend)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else []
    bench(args.out_dir, backend=args.backend, quick=args.quick, sizes=sizes)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
