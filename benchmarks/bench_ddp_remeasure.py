"""A torchrun job tuned as one arm, its claim re-measured by `run --vs-baseline -- torchrun`.

Tunes tests/zoo/ddp_tiny_buckets.py (2-rank gloo DDP whose 1 KB buckets make about a hundred
all-reduce calls a step) with `torchdoctor tune -- torchrun --nproc_per_node 2`, then re-runs
the recommended recipe against the job as it is with `torchdoctor run --recipe RUN
--vs-baseline -- torchrun ...`: fresh pairs of whole torchrun jobs timed in alternating chunks
over the final A/B's window, the way a user checks the claim. Prints the claim, the re-measured
speedup and whether it lies inside the claim's interval (what benchmarks/bench_remeasure.py
asks of a single-process tune), with Welch's test of the two sets of pair ratios beside it
(`measure.replicates_agree`, at the A/B's confidence).

    python benchmarks/bench_ddp_remeasure.py
    python benchmarks/bench_ddp_remeasure.py --pairs 4 --out /tmp/ddp-remeasure
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torchdoctor.measure import replicates_agree
from torchdoctor.tune import Confirmation
from torchdoctor.tune.arms import MeasurePlan
from torchdoctor.tune.records import read_trial

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "zoo" / "ddp_tiny_buckets.py"
#: The job as it is; its dataset is long enough that no arm ends.
JOB = [str(ZOO), "--steps", "100000"]
TORCHRUN = ["torchrun", "--nproc_per_node", "2"]


def _cli(
    *args: str, prefix: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """One `torchdoctor --json ...` command, run after `prefix` (e.g. `ip netns exec NAME`)
    with `env` (default: this process's); its JSON document (exit 0 asked)."""
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "torchdoctor", "--json", *args],
        capture_output=True,
        text=True,
        check=False,
        env=None if env is None else dict(env),
    )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["(no stderr)"]
        sys.exit(f"torchdoctor {args[0]} exited {done.returncode}: {tail[0]}")
    return dict(json.loads(done.stdout))


def _ratios(rates: object, baseline: object) -> list[float]:
    assert isinstance(rates, list) and isinstance(baseline, list)
    return [float(r) / float(b) for r, b in zip(rates, baseline, strict=True)]


def _judged(
    confirm: Confirmation,
    again: dict[str, Any],
    interval: tuple[float, float],
    claimed_speedup: float | None = None,
) -> str:
    """The re-measure `again` (`run --vs-baseline`'s JSON) against the tune's final A/B
    `confirm` and its `interval`, as the re-measure benchmarks print it: the speedup and its
    pairs, the ratio to `claimed_speedup` where given, inside or outside the interval, and
    Welch's test of the two sets of pair ratios at the A/B's confidence."""
    claimed = _ratios(confirm.rates, confirm.baseline_rates)
    remeasured = _ratios(again["rates"], again["baseline_rates"])
    speedup = float(again["speedup"])
    agree = replicates_agree(claimed, remeasured, confidence=MeasurePlan().confidence)
    ratio = f"re-measure / claim {speedup / claimed_speedup:.3f}; " if claimed_speedup else ""
    low, high = interval
    return (
        f"{speedup:.3f}x (pairs {', '.join(f'{r:.3f}' for r in remeasured)}); {ratio}"
        f"{'inside' if low <= speedup <= high else 'OUTSIDE'} the claim's interval; Welch's "
        f"test on the pairs' log ratios: {'agree' if agree else 'DIFFER'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default="20m", help="the tune's budget (default 20m)")
    parser.add_argument("--pairs", type=int, default=4, help="run --vs-baseline's pairs")
    parser.add_argument("--out", type=Path, help="folder for both run folders (default: temp)")
    args = parser.parse_args()
    base = args.out or Path(tempfile.mkdtemp(prefix="bench-ddp-remeasure-"))
    tune_dir, again_dir = base / "tune", base / "again"

    began = time.monotonic()
    print(f"tune -- torchrun --nproc_per_node 2 {ZOO.name} (budget {args.budget})", flush=True)
    claim = _cli(
        "tune", "--budget", args.budget, "--knobs", "find_unused_parameters,bucket_cap_mb",
        "--out", str(tune_dir), "--", *TORCHRUN, *JOB,
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
        f"[{low:.3f}, {high:.3f}] from {len(confirm.rates)} fresh pairs of jobs, "
        f"{confirm.steps} steps each; {tuned_s:.0f} s",
        flush=True,
    )
    if not claim["best_recipe"]:
        sys.exit("nothing kept: no claim to re-measure")

    began = time.monotonic()
    again = _cli(
        "run", "--recipe", str(tune_dir), "--vs-baseline", "--pairs", str(args.pairs),
        "--steps", str(confirm.steps), "--out", str(again_dir), "--", *TORCHRUN, *JOB,
    )  # fmt: skip
    print(
        f"  run --vs-baseline, {args.pairs} fresh pairs: "
        f"{_judged(confirm, again, (low, high))}; {time.monotonic() - began:.0f} s",
        flush=True,
    )
    print(f"run folders: {tune_dir}, {again_dir}")


if __name__ == "__main__":
    main()
