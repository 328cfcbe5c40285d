"""torchdoctor's Timer vs torch.utils.benchmark.Timer.blocked_autorange, side by side.

For each statement both timers measure the same thing, alternating ROUNDS times so a drift
in machine load hits both alike; the ratio of the medians of their medians should be within
5% of 1. Then checks that `env`'s fp32 matmul ceiling is within 15% of a hand-timed loop of
2048x2048 `a @ b`.

    python benchmarks/bench_timer.py
"""

from __future__ import annotations

import os
import statistics
import time

import torch
import torch.utils.benchmark as tb

from torchdoctor.measure import Timer
from torchdoctor.measure.ceilings import get_ceilings

ROUNDS = 3
MIN_RUN_TIME_S = 1.0
STATEMENTS = {
    "matmul 1024x1024": ("a @ b", "a = torch.randn(1024, 1024); b = torch.randn(1024, 1024)"),
    "~1 us (tiny tensor add)": ("torch.add(x, y)", "x = torch.ones(4); y = torch.ones(4)"),
    "~10 ms (Python loop)": ("sum(range(300_000))", "pass"),
}
HAND_N = 2048
HAND_CALLS = 10


def _time_pair(stmt: str, setup: str) -> tuple[float, float]:
    threads = torch.get_num_threads()  # torch's Timer defaults to 1 thread; match ours
    ours, theirs = [], []
    for _ in range(ROUNDS):
        ours.append(Timer(stmt, setup, {"torch": torch}).blocked_autorange(MIN_RUN_TIME_S).median)
        ref = tb.Timer(stmt, setup, globals={"torch": torch}, num_threads=threads)
        theirs.append(ref.blocked_autorange(min_run_time=MIN_RUN_TIME_S).median)
    return statistics.median(ours), statistics.median(theirs)


def _hand_timed_fp32_flops() -> float:
    a, b = torch.randn(HAND_N, HAND_N), torch.randn(HAND_N, HAND_N)
    for _ in range(2):  # warm-up
        a @ b
    start = time.perf_counter()
    for _ in range(HAND_CALLS):
        a @ b
    return 2.0 * HAND_N**3 * HAND_CALLS / (time.perf_counter() - start)


def main() -> None:
    print(f"nproc={os.cpu_count()} torch={torch.__version__} threads={torch.get_num_threads()}")
    print(f"{'statement':28} {'torchdoctor':>12} {'torch':>12} {'ratio':>7}  within 5%")
    for name, (stmt, setup) in STATEMENTS.items():
        ours, theirs = _time_pair(stmt, setup)
        ratio = ours / theirs
        print(
            f"{name:28} {ours * 1e6:10.3f}us {theirs * 1e6:10.3f}us {ratio:7.3f}  "
            f"{'yes' if abs(ratio - 1) <= 0.05 else 'NO'}"
        )
    hand_before = _hand_timed_fp32_flops()
    ceilings = get_ceilings(refresh=True)
    hand_after = _hand_timed_fp32_flops()
    hand = statistics.mean([hand_before, hand_after])
    env_fp32 = ceilings.peak_flops["float32"]
    ratio = env_fp32 / hand
    env_n = ceilings.method["matmul_n"]["float32"]
    print(
        f"env fp32 ceiling {env_fp32 / 1e9:.1f} GFLOP/s (n={env_n})"
        f" vs hand-timed {HAND_N}x{HAND_N} a @ b loop {hand / 1e9:.1f} GFLOP/s "
        f"(before {hand_before / 1e9:.1f}, after {hand_after / 1e9:.1f}): ratio {ratio:.3f}  "
        f"within 15%: {'yes' if abs(ratio - 1) <= 0.15 else 'NO'}"
    )


if __name__ == "__main__":
    main()
