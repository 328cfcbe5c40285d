"""A model compared with itself: how often `serve.compare_variants` says "no significant
difference" at p50 and at p99 (the claim: in at least 95% of repeats).

Each repeat serves the same eager model on both sides, interleaved in shuffled turns, with
LoadGen's 459 requests per side (the p99 minimum), and judges p50 and p99 by the
order-statistic intervals and the 2% practical margin.

    python benchmarks/bench_serve_self.py [--model mlp] [--repeats 100] [--device cpu]
    python benchmarks/bench_serve_self.py --quick      # a smoke: 3 repeats
"""

from __future__ import annotations

import argparse
import os

import torch

from torchdoctor.serve import compare_variants, load_target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="3 repeats, to see that it runs")
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    target = load_target(args.model, device=args.device)
    call = target.request(1)
    print(f"nproc={os.cpu_count()} torch={torch.__version__} model={args.model} "
          f"device={args.device} repeats={repeats}")  # fmt: skip
    same = {50.0: 0, 99.0: 0}
    speedups: dict[float, list[float]] = {50.0: [], 99.0: []}
    for seed in range(repeats):
        result = compare_variants(call, call, names=("a", "b"), device=args.device, seed=seed)
        for c in result.by_percentile:
            same[c.percentile] += c.verdict == "no_significant_difference"
            speedups[c.percentile].append(c.speedup)
    for p in (50.0, 99.0):
        spread = sorted(abs(s - 1.0) for s in speedups[p])
        print(
            f"p{p:g}: no significant difference in {same[p]}/{repeats} "
            f"({same[p] / repeats:.0%}; claim >= 95%); |speedup - 1| median "
            f"{spread[len(spread) // 2]:.2%}, max {spread[-1]:.2%}"
        )


if __name__ == "__main__":
    main()
