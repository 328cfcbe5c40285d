"""Re-measure a finished tune's claim with `torchdoctor run`, side by side in one run.

Reads a tune (or demo) run folder's `tune.json`, then runs the baseline recipe and the
recommended recipe alternately with `torchdoctor run`, each a fresh process with its own
warm-up (`REMEASURE_PAIRS` pairs, the order alternating), and prints the re-measured speedup
(median of the pair ratios) next to the interval the tuner reported. A user who re-runs the
recipe should see the number they were promised: the re-measured ratio inside the interval.

With `--steps` given more than once, the same re-measure runs at each window in turn, so
that how the spread between `run`s shrinks with a longer window is read in one run
(`default`: `run`'s own window, at least 30 steps and 3 s of them).

    python benchmarks/bench_remeasure.py torchdoctor-runs/demo-.../
    python benchmarks/bench_remeasure.py RUN --steps default --steps 1000 --steps 5000
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from bench_tune_vs_grid import REMEASURE_PAIRS, RUN_STEPS, ratios_speedup, remeasure
from torchdoctor.core import rundir
from torchdoctor.tune.records import TuneResult


def _window(text: str) -> int | None:
    if text == "default":
        return None
    try:
        steps = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a step count or 'default'") from None
    if steps < 1:
        raise argparse.ArgumentTypeError("give 1 or more steps, or 'default'")
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a tune or demo run folder")
    parser.add_argument(
        "--steps",
        type=_window,
        action="append",
        help="steady steps per `run` (repeatable; 'default' for run's own window; "
        "default: the benchmark's RUN_STEPS for the workload)",
    )
    args = parser.parse_args()
    path = args.run_dir / rundir.TUNE
    if not path.is_file():
        parser.error(f"{path} does not exist: give a tune or demo run folder")
    result = TuneResult.read(path)
    windows: list[int | None] = args.steps or [RUN_STEPS.get(result.workload)]
    low, high = result.speedup_ci
    print(f"{result.workload}: baseline {result.baseline_recipe} vs best {result.best_recipe}")
    print(f"  tuner claims {result.speedup:.3f}x [{low:.3f}, {high:.3f}]", flush=True)
    for steps in windows:
        label = "run's default window" if steps is None else f"{steps} steps"
        print(f"  {label}:", flush=True)
        ratios = remeasure(result.workload, result.baseline_recipe, result.best_recipe, steps)
        again = statistics.median(ratios)
        own = ratios_speedup(ratios)
        inside = "inside" if low <= again <= high else "OUTSIDE"
        print(
            f"  {label}: re-measured by {REMEASURE_PAIRS} pairs of `torchdoctor run`: "
            f"{again:.3f}x (pairs {', '.join(f'{r:.3f}' for r in ratios)}; their own "
            f"{own.speedup:.3f}x [{own.ci_low:.3f}, {own.ci_high:.3f}]), {inside} the "
            "tuner's interval",
            flush=True,
        )


if __name__ == "__main__":
    main()
