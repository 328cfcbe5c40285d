"""Benchmark: where an FSDP2 job's N=2 step goes beyond N=1's on a CPU host, split between
the ranks sharing the machine and what sharding adds.

The FSDP projection (bench_fsdp_projection.py) multiplies N=1's compute by the co-location
slowdown the study's probe reads (`scale._rank_bench.colocation` over its generic kernel, as a
script's study runs it) and adds the collectives. This benchmark checks both halves in one
2-rank gloo job on the zoo's FSDP2 model (tests/zoo/fsdp2_train.py, no plant, one intra-op
thread per rank as the study sets it), in the same rounds so that a drift of the host falls on
every arm:

- the probe's own reading: `colocation` over `generic_work`, the study's code;
- the job's own step co-located: each rank's copy of the model sharded over a world of one
  (a mesh of its own rank: FSDP2 then gathers nothing, as at N=1), timed by the same
  `colocation` (rank 0 alone, then both at once): the slowdown the projection should use;
- the N=2 step (the model sharded over both ranks) against the co-located N=1 steps: what
  sharding adds beyond sharing the machine (the collectives, their waits, FSDP's copies),
  each phase in wall time and in the main thread's CPU time: their difference is the time
  the rank's step did not run (waiting for a collective, or preempted by gloo's threads).

Printed: each arm's slowdown with its 95% interval per round, then the medians, and the
N=2 step over the co-located N=1 step with its phases (forward, backward, optimizer).

    python benchmarks/bench_fsdp_colocation.py [--rounds 3] [--steps 6]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ZOO = Path(__file__).resolve().parent.parent / "tests" / "zoo" / "fsdp2_train.py"
#: The zoo script's defaults (its argparse): samples per rank, blocks, width.
BATCH, DEPTH, WIDTH = 512, 8, 256
#: Rounds of the co-location probe per arm and round (the study's --quick count,
#: `collectives.QUICK_COLOCATION_ROUNDS`).
PROBE_ROUNDS = 3


def _zoo() -> Any:
    spec = importlib.util.spec_from_file_location("fsdp2_train", ZOO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rank_side(rounds: int, steps: int) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.device_mesh import DeviceMesh

    from torchdoctor.scale._rank_bench import colocation, generic_work

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    zoo = _zoo()
    own = [dist.new_group([r]) for r in range(world)][rank]

    def build(mesh: Any) -> tuple[Any, Any]:
        shard = zoo.fully_shard
        if mesh is not None:  # every fully_shard call of the zoo's over a world of one
            zoo.fully_shard = lambda m, **kw: shard(m, mesh=mesh, **kw)
        try:
            torch.manual_seed(0)
            model = zoo.Stack(DEPTH, WIDTH)
            zoo.shard(model, "none")
        finally:
            zoo.fully_shard = shard
        return model, torch.optim.AdamW(model.parameters(), lr=1e-3)

    one = build(DeviceMesh.from_group(own, "cpu"))
    two = build(None)
    g = torch.Generator().manual_seed(1 + rank)

    def step(arm: tuple[Any, Any], phases: list[float]) -> None:
        """One step; `phases` gains its forward, backward and optimizer wall seconds, then the
        same three in the main thread's CPU seconds (`time.thread_time`: only while it runs,
        so neither a wait for a collective nor a preemption counts)."""
        model, optimizer = arm
        x, y = torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, 1, generator=g)
        marks = [(time.perf_counter(), time.thread_time())]
        loss = nn.functional.mse_loss(model(x).float(), y)
        marks.append((time.perf_counter(), time.thread_time()))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        marks.append((time.perf_counter(), time.thread_time()))
        optimizer.step()
        marks.append((time.perf_counter(), time.thread_time()))
        for clock in (0, 1):
            for i in range(3):
                phases[3 * clock + i] += marks[i + 1][clock] - marks[i][clock]

    def steps_of(arm: tuple[Any, Any]) -> tuple[float, list[float]]:
        phases = [0.0] * 6
        dist.barrier()
        for _ in range(steps):
            step(arm, phases)
        return sum(phases[:3]) / steps, [p / steps for p in phases]

    device = torch.device("cpu")
    generic = generic_work()
    scratch = [0.0] * 6
    for arm in (one, two):
        steps_of(arm)  # warm: the first steps allocate and build FSDP's buffers
    out: dict[str, list[Any]] = {"probe": [], "job": [], "n1": [], "n2": []}
    for r in range(rounds):
        out["probe"].append(colocation(generic, "generic kernel", PROBE_ROUNDS, device))
        out["job"].append(colocation(lambda: step(one, scratch), "job", PROBE_ROUNDS, device))
        out["n1"].append(steps_of(one))
        out["n2"].append(steps_of(two))
        if rank == 0:
            p, j = out["probe"][-1], out["job"][-1]
            print(
                f"round {r}: probe (generic kernel) x{p.slowdown:.3f} [{p.slowdown_ci[0]:.3f}, "
                f"{p.slowdown_ci[1]:.3f}]; the job's own step x{j.slowdown:.3f} "
                f"[{j.slowdown_ci[0]:.3f}, {j.slowdown_ci[1]:.3f}]; N=2 step "
                f"{out['n2'][-1][0] * 1e3:.1f} ms over co-located N=1 "
                f"{out['n1'][-1][0] * 1e3:.1f} ms: x{out['n2'][-1][0] / out['n1'][-1][0]:.3f}",
                flush=True,
            )
    if rank == 0:

        def med(key: str) -> float:
            return statistics.median(p.slowdown for p in out[key])

        def phases(key: str) -> str:
            mid = [statistics.median(s[1][i] for s in out[key]) * 1e3 for i in range(6)]
            return (
                "wall: forward {:.1f}, backward {:.1f}, optimizer {:.1f} ms; main thread's "
                "CPU: forward {:.1f}, backward {:.1f}, optimizer {:.1f} ms".format(*mid)
            )

        alone = statistics.median(p.alone.median for p in out["job"]) * 1e3
        sharded = [a[0] / b[0] for a, b in zip(out["n2"], out["n1"], strict=True)]
        print(
            f"\nmedian co-location slowdown: probe x{med('probe'):.3f}, the job's own step "
            f"x{med('job'):.3f} (its step alone {alone:.1f} ms)\n"
            f"N=2 over co-located N=1: x{statistics.median(sharded):.3f} "
            f"(min {min(sharded):.3f}, max {max(sharded):.3f})\n"
            f"  co-located N=1: {phases('n1')}\n  N=2:            {phases('n2')}",
            flush=True,
        )
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6, help="steps per arm and round")
    parser.add_argument("--rank-side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_side:
        rank_side(args.rounds, args.steps)
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # as the study sets every rank (scale.launch)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node"]
    cmd += ["2", __file__, "--rank-side", "--rounds", str(args.rounds), "--steps", str(args.steps)]
    raise SystemExit(subprocess.run(cmd, env=env).returncode)


if __name__ == "__main__":
    main()
