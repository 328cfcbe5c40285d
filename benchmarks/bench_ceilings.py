"""The measured ceilings against a plain hand loop, side by side in one run.

A ceiling is a peak: a plain loop a user could write (warm `a @ b` on 2048 x 2048 float32, and
a 256 MiB `dst.copy_(src)`, each timed for several seconds) must not beat what
`measure_ceilings` reports by more than a few percent. Printed: both figures and their ratio
(ceiling / hand loop; >= 0.97 is the target), and whether the machine was quiet meanwhile.

    python benchmarks/bench_ceilings.py
"""

from __future__ import annotations

import time

import torch

from torchdoctor.measure.ceilings import COPY_BYTES, measure_ceilings
from torchdoctor.measure.load import watch_load

#: A peak may read this much below a hand loop and still be called one.
TARGET_RATIO = 0.97
HAND_N = 2048
HAND_SECONDS = 5.0


def hand_matmul_flops() -> float:
    """Best 0.5 s window of a warm hand loop of `a @ b` (what a person would time)."""
    a = torch.randn(HAND_N, HAND_N)
    b = torch.randn(HAND_N, HAND_N)
    for _ in range(3):
        a @ b
    best = 0.0
    deadline = time.perf_counter() + HAND_SECONDS
    while time.perf_counter() < deadline:
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < 0.5:
            a @ b
            calls += 1
        best = max(best, 2 * HAND_N**3 * calls / (time.perf_counter() - start))
    return best


def hand_copy_bandwidth() -> float:
    """Best 0.5 s window of a warm hand loop of `dst.copy_(src)` (bytes read + written)."""
    n = COPY_BYTES // 4
    src, dst = torch.randn(n), torch.empty(n)
    dst.copy_(src)
    best = 0.0
    deadline = time.perf_counter() + HAND_SECONDS
    while time.perf_counter() < deadline:
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < 0.5:
            dst.copy_(src)
            calls += 1
        best = max(best, 2 * COPY_BYTES * calls / (time.perf_counter() - start))
    return best


def main() -> None:
    with watch_load() as load:
        ceilings = measure_ceilings("cpu")
        hand_flops = hand_matmul_flops()
        hand_bw = hand_copy_bandwidth()
    reading = load.reading
    fp32 = ceilings.peak_flops["float32"]
    rows = [
        ("fp32 matmul GFLOP/s", fp32 / 1e9, hand_flops / 1e9),
        ("copy GB/s", ceilings.mem_bandwidth_bytes_per_s / 1e9, hand_bw / 1e9),
    ]
    print(
        f"{'ceiling':22} {'measured':>10} {'hand loop':>10} {'ratio':>7}  target >= {TARGET_RATIO}"
    )
    for name, measured, hand in rows:
        print(f"{name:22} {measured:10.1f} {hand:10.1f} {measured / hand:7.3f}")
    if reading is None or not reading.disturbed:
        print("machine: quiet during the measurements")
    else:
        print(f"machine: DISTURBED: {reading.warning}")
    for dtype, flops in sorted(ceilings.peak_flops.items()):
        print(f"  peak {dtype}: {flops / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
