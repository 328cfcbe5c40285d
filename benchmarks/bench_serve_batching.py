"""The batching simulation against the real dynamic batcher: p99 at three arrival rates.

At 30%, 60% and 85% of the capacity a first closed-loop probe implies, seeded Poisson arrivals
are served for real by the dynamic batcher, in segments of `--segment` requests. Each segment
is bracketed by closed-loop service probes (`serve.service_probe`) run right before and right
after it, on the batcher's own thread, calls, device sync, clock and intra-op threads: every
batch size, after each idle gap, in a shuffled order. The segment's prediction is the batching
simulation on the segment's arrivals, drawing each batch's service from its two probes only
(never from the real segment's own service times), pooled over `SIMULATION_REPLICAS` draws.
The claim: the paired prediction's p99 within 15% of the real batcher's at each rate.

Printed beside it, the predictions the pairing replaces: the same simulation from the first
probe only (minutes before: the host's speed moves in between), and the table of medians of
back-to-back calls alone (no tail, no cold starts).

    python benchmarks/bench_serve_batching.py [--model cnn] [--requests 6000] [--device cpu]
    python benchmarks/bench_serve_batching.py --quick      # a smoke: few requests
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from torchdoctor.serve import (
    BatchPolicy,
    RealClock,
    ServiceTime,
    arrival_times,
    capacity,
    load_target,
    percentile,
    run_batcher,
    simulate_batcher,
)
from torchdoctor.serve.run import warmed_calls
from torchdoctor.serve.service_probe import (
    PROBE_GAPS_S,
    PROBE_ROUNDS,
    SIMULATION_REPLICAS,
    ServiceSamples,
    drift,
    loop_cost,
    merged,
    probe_service,
    simulated_latencies,
)

#: Loads (fractions of the first probe's capacity) the predictions are tested at.
LOADS = (0.3, 0.6, 0.85)
#: The claim's tolerance (issue 30): simulated p99 within 15% of the real one.
TOLERANCE = 0.15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--requests",
        type=int,
        default=6000,
        help="real requests per rate: a p99 of 3000 at 85%% load moves by about 20%% between "
        "two runs of one service (tests/unit/serve/test_service_probe.py's host), more than "
        "the claim's 15%%",
    )
    parser.add_argument("--segment", type=int, default=500, help="real requests between probes")
    parser.add_argument("--probe-rounds", type=int, default=PROBE_ROUNDS)
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--max-delay-ms", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="few requests, to see that it runs")
    args = parser.parse_args()
    n, segment, rounds = (
        (200, 100, 1) if args.quick else (args.requests, args.segment, args.probe_rounds)
    )
    target = load_target(args.model, device=args.device)
    sync = target.sync()
    policy = BatchPolicy(args.max_batch, args.max_delay_ms / 1e3)
    calls = warmed_calls(target.request, args.max_batch, sync)
    clock = RealClock()
    loop = loop_cost(policy, clock)

    def probe(seed: int) -> ServiceSamples:
        return probe_service(calls, clock, rounds=rounds, sync=sync, seed=seed, loop_s=loop)

    early = probe(0)
    # The rates are set from the first probe's back-to-back medians, as a closed-loop table.
    table = [
        ServiceTime(batch_size=b, seconds=early.back_to_back_s(b))
        for b in range(1, args.max_batch + 1)
    ]
    cap = capacity(table, args.max_batch)
    print(f"nproc={os.cpu_count()} torch={torch.__version__} "
          f"intra-op threads={torch.get_num_threads()} "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')} model={args.model} "
          f"device={args.device} requests={n} per rate policy={policy} "
          f"capacity={cap:.0f}/s")  # fmt: skip
    print(
        "first probe's t(b) ms (back-to-back medians): "
        + ", ".join(f"{r.batch_size}:{r.seconds * 1e3:.3f}" for r in table)
    )
    print(
        f"pairing: each rate's {n} real requests are served in segments of {segment}; a "
        f"closed-loop probe runs right before and right after every segment ({rounds} rounds "
        f"x {args.max_batch} batch sizes x {len(PROBE_GAPS_S)} idle gaps "
        f"({', '.join(f'{g * 1e3:g}' for g in PROBE_GAPS_S)} ms), shuffled each round), on the "
        "batcher's own Python thread (one thread: it sleeps between batches and calls the "
        "model itself), through the same calls, sync and clock, with the same intra-op "
        f"threads; a segment's simulation draws service times from its two probes only, "
        f"the sleeps' overshoot from the probes' sleeps, the loop's cost ({loop * 1e3:.4f} ms "
        "a batch) from a closed-loop no-op batcher run, never from the real segment; "
        f"{SIMULATION_REPLICAS} simulation draws pooled per segment"
    )
    within = 0
    for i, load in enumerate(LOADS):
        began = time.perf_counter()
        rate = load * cap
        arrivals = arrival_times("poisson", rate, n, seed=i)
        probes = [probe(1000 * (i + 1))]
        real: list[np.ndarray] = []
        paired: list[np.ndarray] = []
        unpaired: list[np.ndarray] = []
        table_only: list[np.ndarray] = []
        batches_real: list[int] = []
        service_real: list[float] = []
        probe_s = real_s = 0.0
        for k, lo in enumerate(range(0, n, segment)):
            # A segment's arrivals from its first request's gap on (the queue starts empty,
            # in the real run and in its simulation alike).
            seg = arrivals[lo : lo + segment] - (arrivals[lo - 1] if lo else 0.0)
            start = time.perf_counter()
            trace = run_batcher(lambda b: calls[b](), seg, policy, clock, sync)
            real_s += time.perf_counter() - start
            start = time.perf_counter()
            probes.append(probe(1000 * (i + 1) + k + 1))
            probe_s += time.perf_counter() - start
            real.append(trace.latencies_s)
            batches_real += trace.batch_sizes
            service_real += list(trace.dones_s - trace.starts_s)
            both = merged(probes[-2:])
            seed = 100 * k
            paired.append(simulated_latencies(seg, both, policy, seed=seed))
            unpaired.append(simulated_latencies(seg, early, policy, seed=seed))
            table_only.append(simulate_batcher(seg, table, policy).latencies_s)
        p_real = percentile(np.concatenate(real), 99.0)
        p_paired = percentile(np.concatenate(paired), 99.0)
        p_unpaired = percentile(np.concatenate(unpaired), 99.0)
        p_table = percentile(np.concatenate(table_only), 99.0)
        ok = abs(p_paired / p_real - 1.0) <= TOLERANCE
        within += ok
        steps = [drift(probes[j : j + 2], 1) for j in range(len(probes) - 1)]
        print(
            f"load {load:.0%} ({rate:.0f}/s, {len(probes) - 1} segments, real {real_s:.1f} s, "
            f"probes {probe_s:.1f} s, {time.perf_counter() - began:.0f} s in all): p99 real "
            f"{p_real * 1e3:.3f} ms, paired prediction {p_paired * 1e3:.3f} ms, ratio "
            f"{p_paired / p_real:.3f} ({'within' if ok else 'outside'} 15%)"
        )
        print(
            f"    instead: first probe only {p_unpaired / p_real:.3f}, back-to-back medians "
            f"only {p_table / p_real:.3f}; mean batch real {np.mean(batches_real):.2f}; mean "
            f"service real {np.mean(service_real) * 1e3:.3f} ms, first probe's t(1) "
            f"{early.median_s(1) * 1e3:.3f} ms, this rate's probes' t(1) "
            f"{min(p.median_s(1) for p in probes) * 1e3:.3f}-"
            f"{max(p.median_s(1) for p in probes) * 1e3:.3f} ms (host drift across them "
            f"{drift(probes, 1):.2f}x, between a segment's two probes at most "
            f"{max(steps):.2f}x)"
        )
    print(f"paired simulation within 15% at {within}/{len(LOADS)} rates (claim: all)")


if __name__ == "__main__":
    main()
