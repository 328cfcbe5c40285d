"""The handwritten_attention prescription, measured: the `gpt` workload with attention written
by hand (`attention=manual`: matmul, mask, softmax, matmul) against the same model through
`scaled_dot_product_attention` (`attention=sdpa`), training on CPU.

Both models start from the same weights and see the same batches; rounds alternate a chunk of
training steps of each (which goes first alternates too), and the speedup is the paired ratio
of their chunk times (`measure.compare_samples`), with its 95% interval. The losses of the two
after the same steps are printed side by side: the change is exact up to float rounding.

    python benchmarks/bench_sdpa_prescription.py [--rounds 12] [--chunk 5] [--block 128]
    python benchmarks/bench_sdpa_prescription.py --quick   # a smoke run: does it work at all
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch
from torch.utils.data import DataLoader

from torchdoctor.measure import compare_samples
from torchdoctor.workloads import get_workload


def trainer(attention: str, block: int, layers: int, batch: int) -> Callable[[int], float]:
    """A training loop of `gpt` with `attention`; calling it runs n steps, returns the loss."""
    torch.manual_seed(0)
    wl = get_workload("gpt", block=block, layers=layers, attention=attention, batch_size=batch)
    model = wl.build_model()
    opt = wl.build_optimizer(model.parameters(), "foreach")
    data = wl.build_dataset(0)

    def batches() -> object:
        while True:
            yield from DataLoader(data, batch_size=batch)

    stream = batches()

    def run(n: int) -> float:
        loss = torch.zeros(())
        for _ in range(n):
            x, y = next(stream)  # type: ignore[call-overload]
            loss = wl.loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return float(loss.detach())

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--chunk", type=int, default=5)
    parser.add_argument("--block", type=int, default=128, help="sequence length T")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny model, 4 rounds")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.chunk, args.block, args.layers, args.batch_size = 4, 1, 32, 1, 2
    if args.threads:
        torch.set_num_threads(args.threads)
    load = os.getloadavg()
    print(f"machine: nproc={os.cpu_count()} cpu={platform.processor() or platform.machine()}")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"load average (1/5/15 min) at the start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"gpt block={args.block} layers={args.layers} batch={args.batch_size}")
    manual = trainer("manual", args.block, args.layers, args.batch_size)
    sdpa = trainer("sdpa", args.block, args.layers, args.batch_size)
    manual(1), sdpa(1)  # warm-up: allocator, first-call dispatch
    times: dict[str, list[float]] = {"manual": [], "sdpa": []}
    losses: dict[str, float] = {}
    for i in range(args.rounds):
        order = [("manual", manual), ("sdpa", sdpa)]
        for name, run in order if i % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            losses[name] = run(args.chunk)
            times[name].append((time.perf_counter() - start) / args.chunk)
    for name in ("manual", "sdpa"):
        print(f"{name:6s} median step {statistics.median(times[name]) * 1e3:8.3f} ms")
    est = compare_samples(times["manual"], times["sdpa"], paired=True)
    print(
        f"sdpa speedup over the hand-written attention: {est.speedup:.3f}x "
        f"(95% CI {est.ci_low:.3f} .. {est.ci_high:.3f}; verdict {est.verdict})"
    )
    print(f"loss after the same steps: manual {losses['manual']:.5f}, sdpa {losses['sdpa']:.5f}")


if __name__ == "__main__":
    main()
