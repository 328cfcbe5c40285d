"""The SLA search against an exhaustive sweep, both measured for real under the batcher.

The sweep measures every rate of a 64-point geometric grid from 10% to 120% of the capacity
the service-time table implies (then confirms its best); the binary search bisects the same
range, re-measuring a doubtful failure (the percentile's interval reaching under the bound)
and pooling its runs before trusting it, within `BINARY_MAX_MEASUREMENTS` (16) in all. Printed
as ratios, the claim: the search's confirmed rate at least 95% of the sweep's best SLA-valid
rate, with at most 25% of its measurements.

    python benchmarks/bench_serve_sla.py [--model mlp] [--sla 'p99<=5ms'] [--device cpu]
    python benchmarks/bench_serve_sla.py --quick      # a smoke: a 16-point sweep
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from torchdoctor.serve import (
    BatchPolicy,
    binary_search_sla,
    capacity,
    doubling,
    load_target,
    parse_sla,
    sweep_sla,
    table_from,
)
from torchdoctor.serve.curves import batch_curve
from torchdoctor.serve.run import SLA_HIGH_LOAD, SLA_LOW_LOAD, real_measure
from torchdoctor.serve.sla import BINARY_MAX_MEASUREMENTS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sla", default="p99<=5ms")
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--points", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="a 16-point sweep, to see it run")
    args = parser.parse_args()
    sla = parse_sla(args.sla)
    target = load_target(args.model, device=args.device)
    sync = target.sync()
    curve = batch_curve(target.request, doubling(args.max_batch), calls=50, sync=sync)
    table = table_from(curve)
    policy = BatchPolicy(args.max_batch, 0.0)
    measure = real_measure(target.request, policy, sla, arrivals="poisson", sync=sync)
    cap = capacity(table, args.max_batch)
    low, high = SLA_LOW_LOAD * cap, SLA_HIGH_LOAD * cap
    points = 16 if args.quick else args.points
    print(f"nproc={os.cpu_count()} torch={torch.__version__} model={args.model} "
          f"device={args.device} sla={sla.text} range={low:.0f}..{high:.0f}/s")  # fmt: skip
    start = time.perf_counter()
    sweep = sweep_sla(measure, sla, low, high, points=points)
    sweep_s = time.perf_counter() - start
    start = time.perf_counter()
    binary = binary_search_sla(measure, sla, low, high)
    binary_s = time.perf_counter() - start
    for name, r, s in (("sweep", sweep, sweep_s), ("binary", binary, binary_s)):
        best = f"{r.best.achieved_rate:.0f}/s" if r.best else "none"
        print(f"{name}: {r.status}, best {best}, {r.measurements} measurements, {s:.1f} s; "
              f"{r.reason}")  # fmt: skip
    rates = [p.target_rate for p in binary.points]
    print(
        "binary's runs (rate, p, interval, meets): "
        + "; ".join(
            f"{p.target_rate:.0f}/s {p.latency_s * 1e6:.0f}us "
            f"[{(p.ci_low_s or 0) * 1e6:.0f}, "
            f"{'-' if p.ci_high_s is None else f'{p.ci_high_s * 1e6:.0f}'}] "
            f"{'meets' if p.meets else 'fails'}"
            for p in binary.points
        )
    )
    print(
        f"binary re-measured {len({r for r in rates if rates.count(r) > 1})} doubtful "
        f"failure(s) (pooled); budget {BINARY_MAX_MEASUREMENTS} measurements"
    )
    if sweep.best and binary.best:
        ratio = binary.best.achieved_rate / sweep.best.achieved_rate
        print(
            f"throughput ratio binary/sweep {ratio:.3f} "
            f"(claim >= 0.95); measurements ratio {binary.measurements / sweep.measurements:.3f} "
            f"(claim <= 0.25)"
        )
    else:
        print("no ratio: one of the searches found no valid rate (see the reasons above)")


if __name__ == "__main__":
    main()
