"""Re-measure a finished tune's claim with `torchdoctor run`, side by side in one run.

Reads a tune (or demo) run folder's `tune.json`, then runs the baseline recipe and the
recommended recipe alternately with `torchdoctor run`, each a fresh process with its own
warm-up (`REMEASURE_PAIRS` pairs, the order alternating), and prints the re-measured speedup
(median of the pair ratios) next to the interval the tuner reported. A user who re-runs the
recipe should see the number they were promised: the re-measured ratio inside the interval.

    python benchmarks/bench_remeasure.py torchdoctor-runs/demo-.../
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from bench_tune_vs_grid import REMEASURE_PAIRS, RUN_STEPS, remeasure
from torchdoctor.core import rundir
from torchdoctor.tune.records import TuneResult


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a tune or demo run folder")
    args = parser.parse_args()
    path = args.run_dir / rundir.TUNE
    result = TuneResult.read(path)
    if result.workload not in RUN_STEPS:
        raise SystemExit(f"{path}: workload {result.workload!r} has no steps set in RUN_STEPS")
    low, high = result.speedup_ci
    print(f"{result.workload}: baseline {result.baseline_recipe} vs best {result.best_recipe}")
    print(f"  tuner claims {result.speedup:.3f}x [{low:.3f}, {high:.3f}]", flush=True)
    ratios = remeasure(result.workload, result.baseline_recipe, result.best_recipe)
    again = statistics.median(ratios)
    inside = "inside" if low <= again <= high else "OUTSIDE"
    print(
        f"re-measured by {REMEASURE_PAIRS} pairs of `torchdoctor run`: {again:.3f}x "
        f"(pairs {', '.join(f'{r:.3f}' for r in ratios)}), {inside} the tuner's interval"
    )


if __name__ == "__main__":
    main()
