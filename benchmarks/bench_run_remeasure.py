"""A workload's tune, its claim re-measured by `run WORKLOAD --recipe RUN --vs-baseline`.

Tunes the built-in `cnn` with a small budget and a knob or two (`torchdoctor tune cnn`), then
re-runs the recommended recipe against the workload as it is with `torchdoctor run cnn
--recipe RUN --vs-baseline`: fresh process pairs timed in alternating chunks over the final
A/B's window, the way a user checks the claim. Prints the claim, the re-measured speedup and
whether it lies inside the claim's interval, with Welch's test of the two sets of pair ratios
beside it (`measure.replicates_agree`, at the A/B's confidence), as
benchmarks/bench_ddp_remeasure.py does for a torchrun job.

    python benchmarks/bench_run_remeasure.py
    python benchmarks/bench_run_remeasure.py --budget 8m --knobs channels_last,threads
    python benchmarks/bench_run_remeasure.py --workload mlp --knobs threads,optimizer_impl
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# The same `torchdoctor --json` call and pair ratios as the torchrun job's re-measure.
from bench_ddp_remeasure import _cli, _judged
from torchdoctor.tune import Confirmation
from torchdoctor.tune.records import read_trial


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="cnn", help="the workload tuned (default cnn)")
    parser.add_argument("--budget", default="5m", help="the tune's budget (default 5m)")
    parser.add_argument(
        "--knobs",
        default="channels_last,optimizer_impl",
        help="the knobs tried (default channels_last,optimizer_impl: cnn's CPU wins)",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument(
        "--no-diagnose",
        action="store_true",
        help="tune without diagnosing first (the knobs are given: it only orders them)",
    )
    parser.add_argument("--pairs", type=int, default=4, help="run --vs-baseline's pairs")
    parser.add_argument("--out", type=Path, help="folder for both run folders (default: temp)")
    args = parser.parse_args()
    base = args.out or Path(tempfile.mkdtemp(prefix="bench-run-remeasure-"))
    tune_dir, again_dir = base / "tune", base / "again"
    where = ["--device", args.device]
    first = ["--no-diagnose"] if args.no_diagnose else []

    began = time.monotonic()
    print(f"tune {args.workload} --knobs {args.knobs} (budget {args.budget})", flush=True)
    claim = _cli(
        "tune", args.workload, "--budget", args.budget, "--knobs", args.knobs,
        "--out", str(tune_dir), *where, *first,
    )  # fmt: skip
    tuned_s = time.monotonic() - began
    confirm = read_trial(sorted((tune_dir / "trials").iterdir())[-1])
    if not isinstance(confirm, Confirmation):
        sys.exit(f"the tune ended without a final A/B: {claim.get('notes')}")
    interval = claim["speedup_ci"]
    assert isinstance(interval, list)
    low, high = float(interval[0]), float(interval[1])
    print(
        f"  recipe {claim['best_recipe']}; claims {claim['speedup']:.3f}x "
        f"[{low:.3f}, {high:.3f}] from {len(confirm.rates)} fresh pairs, "
        f"{confirm.steps} steps each; {tuned_s:.0f} s",
        flush=True,
    )
    if claim["best_recipe"] == claim["baseline_recipe"]:
        sys.exit("nothing kept: no claim to re-measure")

    began = time.monotonic()
    again = _cli(
        "run", args.workload, "--recipe", str(tune_dir), "--vs-baseline",
        "--pairs", str(args.pairs), "--steps", str(confirm.steps), "--out", str(again_dir),
        *where,
    )  # fmt: skip
    print(
        f"  run {args.workload} --recipe RUN --vs-baseline, {args.pairs} fresh pairs: "
        f"{_judged(confirm, again, (low, high))}; {time.monotonic() - began:.0f} s",
        flush=True,
    )
    print(f"run folders: {tune_dir}, {again_dir}")


if __name__ == "__main__":
    main()
