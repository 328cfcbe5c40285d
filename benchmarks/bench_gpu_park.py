"""A script using most of its GPU's memory, driven as the tuner drives it: one arm at a time.

A training script whose weights, gradients and Adam state take `--share` of the GPU's memory
(default 0.6: beside a second resident copy it cannot fit) is launched twice, as the ladder
launches the best and a candidate, with the arms' device turns (tune/turns.py): the idle arm
is parked in host memory before the other runs. Both arms warm up, run an interleaved A/B of
`--rounds` rounds, and the baseline's quality reference (a third launch) runs with both
parked. Printed: whether any request ran out of memory (it must not), each arm's parks and
the bytes moved, the seconds switching took (kept out of every step), and the step time.

On a CPU (`--quick`, or no GPU) the script is small and nothing is parked: it checks that the
path runs. Run on a GPU for the figures:

    python benchmarks/bench_gpu_park.py [--share 0.6] [--rounds 6] [--quick]

It prints, on a GPU: `out of memory: none`, then per arm `parks N, moved X GiB, switching
S s (T ms a switch), step U ms`.
"""

from __future__ import annotations

import argparse
import tempfile
import textwrap
import time
from pathlib import Path

import torch

from torchdoctor.procs import WorkerFailure
from torchdoctor.tune.arms import MeasurePlan, interleave
from torchdoctor.tune.sources import ScriptArms, ScriptCommand

#: Bytes of trained state per fp32 parameter under Adam: weight, gradient, two moments.
STATE_BYTES_PER_PARAM = 16

SCRIPT = textwrap.dedent(
    """
    import sys, torch
    width, layers, device = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    model = model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(64, width, device=device)
    for _ in range(100000):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
    """
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--share", type=float, default=0.6, help="of the GPU's memory")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="a small CPU run: the path works")
    args = parser.parse_args()
    on_gpu = torch.cuda.is_available() and not args.quick
    layers = 8
    if on_gpu:
        total = torch.cuda.get_device_properties(0).total_memory
        params = args.share * total / STATE_BYTES_PER_PARAM
        width = int((params / layers) ** 0.5)
        print(f"{torch.cuda.get_device_name(0)}: {total / 2**30:.1f} GiB, state share {args.share}")
    else:
        width = 64
        print("CPU: nothing is parked; checking that the path runs")
    work = Path(tempfile.mkdtemp(prefix="bench-gpu-park-"))
    script = work / "train.py"
    script.write_text(SCRIPT)
    device = "cuda" if on_gpu else "cpu"
    plan = MeasurePlan(
        warmup_steps=2, chunk_steps=2, min_chunk_s=0.0, rounds=args.rounds, min_rounds=3
    )
    source = ScriptArms(
        ScriptCommand((str(script), str(width), str(layers), device)), plan, "throughput"
    )
    timeout = lambda: 600.0  # noqa: E731
    arms = []
    failure: WorkerFailure | None = None
    start = time.perf_counter()
    try:
        best = source.open({}, timeout=timeout, log_path=work / "best.log")
        arms.append(best)
        candidate = source.open({}, timeout=timeout, log_path=work / "candidate.log")
        arms.append(candidate)
        interleave(best, candidate, plan, timeout=timeout)
        best.reference_losses(1, 4, timeout=timeout)  # a third launch, both arms parked
    except WorkerFailure as exc:
        failure = exc
    finally:
        for arm in arms:
            arm.close()
    took = time.perf_counter() - start
    if failure is None:
        print(f"out of memory: none ({took:.0f} s)")
    else:
        print(f"failed ({failure.kind}): {failure.reason} ({took:.0f} s)")
    for name, arm in zip(("best", "candidate"), arms, strict=False):
        per = arm.switch_s / arm.switches * 1e3 if arm.switches else 0.0
        step = arm.step_s * 1e3
        print(
            f"{name}: parks {arm.switches}, moved {arm.parked_bytes / 2**30:.2f} GiB, "
            f"switching {arm.switch_s:.2f} s ({per:.0f} ms a switch), step {step:.1f} ms"
        )


if __name__ == "__main__":
    main()
