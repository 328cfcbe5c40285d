"""Engine overhead: `TrainingSession.run_steps` (throughput mode) vs a bare training loop.

Both train the same `mlp` workload (same model, data loader, optimizer, seed) in one process,
in alternating chunks (ABAB...) so machine noise hits both alike. Prints the median step time
of each and the engine's overhead in percent (target: <= 2%, issue 3).

    python benchmarks/bench_engine_overhead.py [--rounds 15] [--chunk 20]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch

from torchdoctor.engine import prepare
from torchdoctor.engine.loader import EndlessBatches, build_loader
from torchdoctor.knobs import Recipe
from torchdoctor.measure import compare_samples
from torchdoctor.workloads import get_workload

#: The issue's acceptance bound on engine overhead.
TARGET_OVERHEAD = 0.02


class HandLoop:
    """The minimal loop a user would write: next batch, forward, loss, backward, step."""

    def __init__(self, seed: int) -> None:
        self.wl = get_workload("mlp")
        torch.manual_seed(seed)
        self.model = self.wl.build_model()
        self.opt = self.wl.build_optimizer(self.model.parameters(), "for_loop")
        loader = build_loader(
            self.wl.build_dataset(seed), {}, batch_size=256, default_workers=0, seed=seed
        )
        self.batches = EndlessBatches(loader)

    def run(self, n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            x, y = self.batches.next()
            loss = self.wl.loss(self.model(x), y)
            loss.backward()
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--chunk", type=int, default=20)
    args = parser.parse_args()

    session = prepare(get_workload("mlp"), Recipe(), device="cpu", seed=0)
    hand = HandLoop(seed=0)
    session.run_steps(5, measure_phases=False)  # warm-up both
    hand.run(5)
    engine_s: list[float] = []
    hand_s: list[float] = []
    for i in range(args.rounds):
        # Alternate which side goes first, so neither always runs on a warmer machine.
        if i % 2:
            hand_s.append(hand.run(args.chunk))
        steps = session.run_steps(args.chunk, measure_phases=False)
        engine_s.append(sum(s.total_s for s in steps) / args.chunk)
        if not i % 2:
            hand_s.append(hand.run(args.chunk))
    session.close()

    print(f"machine: nproc={os.cpu_count()} cpu={platform.processor() or platform.machine()}")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"rounds={args.rounds} chunk={args.chunk} steps, mlp batch 256, interleaved")
    he, hh = statistics.median(engine_s), statistics.median(hand_s)
    print(f"hand loop  median step: {hh * 1e3:8.3f} ms")
    print(f"engine     median step: {he * 1e3:8.3f} ms")
    # Paired by round: drift of the machine between rounds cancels in each round's ratio.
    ratio = compare_samples(hand_s, engine_s, paired=True)
    print(f"engine/hand ratio: {ratio}")
    overhead = 1 / ratio.speedup - 1  # the paired median of engine/hand per round
    verdict = "within" if overhead <= TARGET_OVERHEAD else "ABOVE"
    print(f"engine overhead: {overhead:+.2%} ({verdict} the {TARGET_OVERHEAD:.0%} target)")


if __name__ == "__main__":
    main()
