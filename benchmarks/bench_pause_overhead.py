"""What pausing a script at its step boundaries costs: a driven script against a free-running one.

The tuner drives a user's script in chunks of steps (`torchdoctor.tune.script_worker`): between
two chunks the script waits at an optimizer-step boundary. This compares the steady-state step
time of the same script, same instrumentation, run two ways:

- plain: `torchdoctor.collect.run_script` (instrumented, not driven), a fresh run per round cut
  at `warmup + chunk` steps; the round's score is the mean of its last `chunk` step times (the
  step recorder's, boundary to boundary);
- driven: one live `ScriptWorker`, one chunk of `chunk` steps per round; the round's score is
  the mean of the chunk's rows.

Rounds alternate which goes first, and the ratio is paired per round
(`torchdoctor.measure.paired_speedup` of driven over plain: > 1 means pausing costs time).
What the driven side pays that the plain one does not: the pause itself (caches and CPU
frequency cool down, CUDA's queue drains at the chunk's end, where the losses are read), the
control messages, and the loss read. What it may gain: DataLoader workers prefetch while the
script waits, so the first steps of a chunk of a data-bound script find their batches ready
(try `--script tests/zoo/data_loading_argparse.py --script-args="--steps 100000"`).

    python benchmarks/bench_pause_overhead.py [--rounds 12] [--chunk 8] [--warmup 3]
        [--script tests/zoo/control_well_tuned.py] [--script-args "--steps 100000"]

With the defaults it takes about 3 minutes on a shared 2-core host (load average 1.3-2.6):
the live worker's launch, then per round a fresh launch of the plain side (an interpreter
importing torch, most of a round) and two chunks of 8 steps; 2 rounds took 38 s there.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import tempfile
from pathlib import Path

from torchdoctor.collect import run_script
from torchdoctor.measure import paired_speedup
from torchdoctor.tune.script_worker import ScriptWorker

ROOT = Path(__file__).resolve().parents[1]
#: Deadline of a driven request and of a plain run: a launch imports torch.
TIMEOUT_S = 300.0


def plain_round(argv: list[str], warmup: int, chunk: int, out_dir: Path) -> float:
    """Mean seconds per step of the last `chunk` steps of a fresh instrumented run."""
    profile = run_script(
        argv, steps=warmup + chunk, warmup=0, profile_steps=0, out_dir=out_dir, timeout_s=TIMEOUT_S
    )
    steps = profile.steps[warmup:]
    if len(steps) < chunk:
        raise SystemExit(f"the plain run recorded {len(profile.steps)} steps: {profile.error}")
    return statistics.fmean(s.total_s for s in steps)


def driven_round(worker: ScriptWorker, chunk: int) -> float:
    reply = worker.request({"op": "run", "steps": chunk}, timeout_s=TIMEOUT_S)
    if reply["restarts"]:
        print(f"  (the script ended and was restarted {reply['restarts']}x in this chunk)")
    return statistics.fmean(float(r[0]) for r in reply["steps"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--chunk", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--script", default=str(ROOT / "tests/zoo/control_well_tuned.py"))
    parser.add_argument("--script-args", default="--steps 100000")
    parser.add_argument("--confidence", type=float, default=0.95)
    args = parser.parse_args()
    # Two rounds at least for an interval; a warm-up step at least, so neither side scores
    # a launch's first step and its one-time costs (first-touch allocations, kernel setup).
    if args.rounds < 2 or args.chunk < 1 or args.warmup < 1:
        parser.error("need --rounds >= 2, --chunk >= 1 and --warmup >= 1")
    argv = [args.script, *shlex.split(args.script_args)]

    plain: list[float] = []
    driven: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-pause-") as tmp:
        worker = ScriptWorker(argv)
        try:
            worker.request({"op": "prepare"}, timeout_s=TIMEOUT_S)
            worker.request({"op": "run", "steps": args.warmup}, timeout_s=TIMEOUT_S)
            for i in range(args.rounds):
                # Alternate who goes first, so a slow drift within a round favours neither side.
                if i % 2 == 0:
                    plain.append(plain_round(argv, args.warmup, args.chunk, Path(tmp)))
                    driven.append(driven_round(worker, args.chunk))
                else:
                    driven.append(driven_round(worker, args.chunk))
                    plain.append(plain_round(argv, args.warmup, args.chunk, Path(tmp)))
                ms = (plain[-1] * 1e3, driven[-1] * 1e3)
                print(f"round {i + 1}: plain {ms[0]:.3f} ms, driven {ms[1]:.3f} ms")
        finally:
            worker.close()

    load = os.getloadavg()
    est = paired_speedup(driven, plain, confidence=args.confidence)
    print(f"machine: nproc={os.cpu_count()} cpu={platform.processor() or platform.machine()}")
    print(f"load average (1/5/15 min) at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"script: {shlex.join(argv)}; {args.rounds} rounds of {args.chunk} steps")
    print(f"plain  median step: {statistics.median(plain) * 1e3:8.3f} ms")
    print(f"driven median step: {statistics.median(driven) * 1e3:8.3f} ms")
    print(
        f"driven/plain step time: {est.speedup:.3f} "
        f"[{est.ci_low:.3f}, {est.ci_high:.3f}] ({args.confidence:.0%}, paired over rounds)"
    )


if __name__ == "__main__":
    main()
