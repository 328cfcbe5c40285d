"""Tune vs an exhaustive grid over the same knobs, side by side in one run.

For each workload, every combination of the knob values is measured on its own (a worker
process per recipe, warm-up, then steady-state chunks; the same harness as the tuner), and
`tune` runs over the same knobs. Printed per workload: the grid's best recipe and throughput,
the tuned recipe, the tuned recipe's throughput *as measured by the grid* (so both sides come
from the same measurements) relative to the grid's best (target >= 95%), and the wall time of
each approach.

    python benchmarks/bench_tune_vs_grid.py --quick      # mlp only, 2 knobs (4 recipes)
    python benchmarks/bench_tune_vs_grid.py              # mlp and gpt, 3 knobs (8 recipes each)
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from torchdoctor.tune import TuneConfig, tune
from torchdoctor.tune.arms import MeasurePlan, measure_alone, open_arm
from torchdoctor.tune.sessions import SessionSpec
from torchdoctor.tune.trial import TrialFailure

FULL_KNOBS: dict[str, tuple[Any, ...]] = {
    "compile": ("off", "default"),
    # 2 (this machine's cores, what torch picks by default) first: the first value is the default.
    "threads": (2, 1),
    "set_to_none": (True, False),
}
QUICK_KNOBS: dict[str, tuple[Any, ...]] = {k: FULL_KNOBS[k] for k in ("compile", "threads")}


def grid(workload: str, knobs: dict[str, tuple[Any, ...]]) -> dict[str, float]:
    """samples/s of every combination (recipe key -> throughput; 0 when it failed)."""
    plan = MeasurePlan()
    results: dict[str, float] = {}
    for values in itertools.product(*knobs.values()):
        recipe = dict(zip(knobs, values, strict=True))
        try:
            arm = open_arm(
                SessionSpec(workload=workload, recipe=recipe),
                plan,
                objective="throughput",
                isolate=True,
                timeout_s=900,
                memory_cap_bytes=None,
                log_path=None,
            )
            measure_alone(arm, plan, timeout_s=900)
            results[_key(recipe)] = 1.0 / statistics.median(arm.chunk_scores)
            arm.close()
        except TrialFailure as exc:
            print(f"  grid {recipe}: {exc.status} {exc.reason}")
            results[_key(recipe)] = 0.0
        print(f"  grid {recipe}: {results[_key(recipe)]:,.1f} samples/s", flush=True)
    return results


def _key(recipe: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(recipe.items()))


def _resolved(best: dict[str, Any], knobs: dict[str, tuple[Any, ...]]) -> dict[str, Any]:
    # The tuner only stores changed knobs; fill the rest with each knob's first (default) value.
    return {k: best.get(k, values[0]) for k, values in knobs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="mlp only, compile x threads")
    parser.add_argument("--budget", default=1800.0, type=float, help="tune budget (s)")
    args = parser.parse_args()
    workloads = ["mlp"] if args.quick else ["mlp", "gpt"]
    knobs = QUICK_KNOBS if args.quick else FULL_KNOBS
    rows = []
    for workload in workloads:
        print(f"{workload}: grid over {len(list(itertools.product(*knobs.values())))} recipes")
        start = time.monotonic()
        measured = grid(workload, knobs)
        grid_s = time.monotonic() - start
        start = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            config = TuneConfig(
                workload=workload, knobs=list(knobs), search_batch=False, budget_s=args.budget
            )
            result = tune(config=config, out=Path(tmp) / "run")
        tune_s = time.monotonic() - start
        best_key = max(measured, key=lambda k: measured[k])
        tuned_key = _key(_resolved(result.best_recipe, knobs))
        ratio = measured[tuned_key] / measured[best_key]
        rows.append((workload, best_key, measured[best_key], tuned_key, ratio, grid_s, tune_s))
        print(f"  tune: {tuned_key} ({result.n_trials} trials, {tune_s:.0f} s)", flush=True)
    print()
    print(
        f"{'workload':9} {'grid best':34} {'samples/s':>10} {'tuned':34} {'tuned/best':>10} "
        f"{'grid s':>7} {'tune s':>7} {'time saved':>10}"
    )
    for workload, best_key, best_sps, tuned_key, ratio, grid_s, tune_s in rows:
        print(
            f"{workload:9} {best_key:34} {best_sps:10.1f} {tuned_key:34} {ratio:10.1%} "
            f"{grid_s:7.0f} {tune_s:7.0f} {1 - tune_s / grid_s:10.0%}"
        )


if __name__ == "__main__":
    main()
