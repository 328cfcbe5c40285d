"""What pausing a script at its step boundaries costs, measured inside one live script.

The tuner drives a user's script in chunks of steps (`torchdoctor.procs.ScriptWorker`):
between two chunks the script waits at an optimizer-step boundary while the other arm runs,
and at each chunk's end it reads the chunk's losses. This benchmark compares, in ONE live
`ScriptWorker` (so one process, one allocator, one set of caches), the same number of steps
run two ways, alternating within each round:

- paused: `pieces` chunks of `chunk` steps, each its own `run` command, so the script stops
  and resumes `pieces` times and reads its losses `pieces` times;
- continuous: one chunk of `pieces x chunk` steps (one stop, one loss read).

A round's score on each side is its mean step time from the script's own step rows (each row
boundary to boundary; a chunk's first row from the resume). The ratio paused / continuous is
paired per round (`torchdoctor.measure.paired_speedup`: > 1 means pausing costs step time)
with its interval. The chunk length is the tuner's own rule (`measure.chunk_steps`: at least
`measure.MIN_CHUNK_S` of steps) unless `--chunk` is given. The wall time of the commands,
messages included, is printed beside it: what a paused chunk costs the tuner's clock.

A fresh process per round on one side would fold the process-to-process spread (10-25% on a
small VM) into a ratio meant to show 2%; both sides live in one process here.

    python benchmarks/bench_pause_overhead.py [--rounds 12] [--pieces 8] [--chunk N]
        [--script tests/zoo/control_well_tuned.py] [--script-args "--steps 1000000"]

About 2-3 minutes with the defaults on a 2-core host: one launch, then per round 2 x 8
chunks of about 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import time
from pathlib import Path

from torchdoctor.core.env import fingerprint
from torchdoctor.measure import chunk_steps, paired_speedup
from torchdoctor.procs import Prepare, Ran, Run, ScriptWorker

ROOT = Path(__file__).resolve().parents[1]
#: Deadline of one command (the first prepares the script, which imports torch).
TIMEOUT_S = 300.0
#: Steps run and discarded before the chunk length is set (first-touch allocations, warm-up).
WARMUP_STEPS = 20


def run(worker: ScriptWorker, steps: int) -> Ran:
    reply = worker.request(Run(steps), timeout_s=TIMEOUT_S)
    if reply.restarts:
        raise SystemExit("the script ended inside a round: give it more steps (--script-args)")
    return reply


def side(worker: ScriptWorker, pieces: int, chunk: int, *, paused: bool) -> tuple[float, float]:
    """(mean step seconds from the rows, wall seconds per step of the commands)."""
    start = time.perf_counter()
    replies = (
        [run(worker, chunk) for _ in range(pieces)] if paused else [run(worker, pieces * chunk)]
    )
    wall = time.perf_counter() - start
    rows = [float(row[0]) for reply in replies for row in reply.steps]
    return statistics.fmean(rows), wall / len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--pieces", type=int, default=8, help="chunks per paused side")
    parser.add_argument(
        "--chunk", type=int, default=None, help="steps per chunk (default: the tuner's rule)"
    )
    parser.add_argument("--script", default=str(ROOT / "tests/zoo/control_well_tuned.py"))
    parser.add_argument("--script-args", default="--steps 1000000")
    parser.add_argument("--confidence", type=float, default=0.95)
    args = parser.parse_args()
    if args.rounds < 2 or args.pieces < 2 or (args.chunk is not None and args.chunk < 1):
        parser.error("need --rounds >= 2, --pieces >= 2 and --chunk >= 1")
    argv = [args.script, *shlex.split(args.script_args)]

    paused: list[float] = []
    continuous: list[float] = []
    walls: dict[bool, list[float]] = {True: [], False: []}
    worker = ScriptWorker(argv)
    try:
        worker.request(Prepare(), timeout_s=TIMEOUT_S)
        warm = run(worker, WARMUP_STEPS)
        step_s = statistics.median(float(row[0]) for row in warm.steps)
        chunk = args.chunk or chunk_steps(step_s)
        print(f"step ~{step_s * 1e3:.3f} ms; chunks of {chunk} steps, {args.pieces} per side")
        for i in range(args.rounds):
            # Alternate who goes first, so a slow drift within a round favours neither side.
            order = (True, False) if i % 2 == 0 else (False, True)
            scores = {}
            for is_paused in order:
                scores[is_paused], wall = side(worker, args.pieces, chunk, paused=is_paused)
                walls[is_paused].append(wall)
            paused.append(scores[True])
            continuous.append(scores[False])
            print(
                f"round {i + 1:2d}: paused {scores[True] * 1e3:.3f} ms, "
                f"continuous {scores[False] * 1e3:.3f} ms per step",
                flush=True,
            )
    finally:
        worker.close()

    load = os.getloadavg()
    est = paired_speedup(paused, continuous, confidence=args.confidence)
    wall_est = paired_speedup(walls[True], walls[False], confidence=args.confidence)
    print(f"machine: nproc={os.cpu_count()} cpu={fingerprint().cpu_model}")
    print(f"load average (1/5/15 min) at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"script: {shlex.join(argv)}; {args.rounds} rounds, chunk {chunk} x {args.pieces}")
    print(f"paused     median step: {statistics.median(paused) * 1e3:8.3f} ms")
    print(f"continuous median step: {statistics.median(continuous) * 1e3:8.3f} ms")
    print(
        f"paused/continuous step time: {est.speedup:.4f} [{est.ci_low:.4f}, {est.ci_high:.4f}] "
        f"({args.confidence:.0%}, paired over rounds; target < 1.02)"
    )
    print(
        f"paused/continuous wall per step (commands and messages included): {wall_est.speedup:.4f} "
        f"[{wall_est.ci_low:.4f}, {wall_est.ci_high:.4f}]"
    )


if __name__ == "__main__":
    main()
