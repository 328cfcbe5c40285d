"""Tune vs an exhaustive grid over the same knobs, side by side in one run.

For each workload (`mlp`, `gpt`):

1. the grid: every combination of the knob values, each measured on its own with the tuner's
   harness (a worker process per recipe, warm-up with compilation excluded, then the tuner's
   full `rounds` of steady-state chunks) -> the grid's best recipe;
2. `tune` over the same knobs (the ladder with its sequential A/B, batch search off because
   the grid does not vary the batch);
3. a final interleaved A/B of the tuned recipe against the grid's best (same harness, both
   arms alive, chunks alternating), so both throughputs come from the same measurement.

Printed: the tuned recipe's throughput as a fraction of the grid's best (target >= 95%) with
the paired interval, and the wall time of tune vs the grid.

    python benchmarks/bench_tune_vs_grid.py            # mlp and gpt
    python benchmarks/bench_tune_vs_grid.py --quick    # mlp only
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from torchdoctor.knobs import catalogue
from torchdoctor.tune import KnobSpec, TuneConfig, tune
from torchdoctor.tune.api import knob_space_config
from torchdoctor.tune.arms import MeasurePlan, interleave, measure_alone, open_arm, paired_speedup
from torchdoctor.tune.sessions import SessionSpec
from torchdoctor.tune.trial import TrialFailure

#: The knobs that matter for small models on a CPU and interact (compile's kernels vs the
#: thread count; the optimizer's implementation vs compile): 2 x 2 x 3 = 12 recipes, against a
#: ladder of about 1 + 1 + 1 + 2 trials. The first value of each is the workload's default.
KNOBS: dict[str, tuple[Any, ...]] = {
    "compile": ("off", "default"),
    "threads": (2, 1),
    "optimizer_impl": ("for_loop", "foreach", "fused"),
}
#: Each knob's safety class, from the catalogue (what the tuner's parity check uses).
SAFETY = {k.name: k.safety for k in catalogue() if k.name in KNOBS}
#: Rounds of the final interleaved A/B (more than a trial's, for a tight headline interval).
FINAL_ROUNDS = 16
ARM_TIMEOUT_S = 900.0


def arm_timeout() -> float:
    """Each worker request's timeout (the harness asks before every request)."""
    return ARM_TIMEOUT_S


def _arm(workload: str, recipe: dict[str, Any], plan: MeasurePlan) -> Any:
    return open_arm(
        SessionSpec(workload=workload, recipe=recipe),
        plan,
        objective="throughput",
        isolate=True,
        timeout=arm_timeout,
        memory_cap_bytes=None,
        log_path=None,
    )


def grid(workload: str, plan: MeasurePlan) -> dict[str, float]:
    """samples/s of every combination (recipe key -> throughput; 0 when it failed)."""
    # Measured alone over the tuner's full (maximum) rounds, not the baseline's shorter count.
    full = MeasurePlan(min_rounds=plan.rounds, rounds=plan.rounds)
    results: dict[str, float] = {}
    for values in itertools.product(*KNOBS.values()):
        recipe = dict(zip(KNOBS, values, strict=True))
        try:
            arm = _arm(workload, recipe, full)
            measure_alone(arm, full, timeout=arm_timeout)
            results[_key(recipe)] = 1.0 / statistics.median(arm.chunk_scores)
            arm.close()
        except TrialFailure as exc:
            print(f"  grid {_key(recipe)}: {exc.status} {exc.reason}")
            results[_key(recipe)] = 0.0
        print(f"  grid {_key(recipe)}: {results[_key(recipe)]:,.1f} samples/s", flush=True)
    return results


def _key(recipe: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(recipe.items()))


def _recipe(key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in key.split():
        name, _, text = part.partition("=")
        out[name] = next(v for v in KNOBS[name] if str(v) == text)
    return out


def _resolved(best: dict[str, Any]) -> dict[str, Any]:
    # The tuner only stores changed knobs; fill the rest with each knob's first (default) value.
    return {k: best.get(k, values[0]) for k, values in KNOBS.items()}


def final_ab(workload: str, grid_best: dict[str, Any], tuned: dict[str, Any]) -> tuple[Any, ...]:
    """Interleaved A/B of tuned vs grid best: (grid best samples/s, tuned samples/s, est)."""
    plan = MeasurePlan(rounds=FINAL_ROUNDS)
    a = _arm(workload, grid_best, plan)
    b = _arm(workload, tuned, plan)
    try:
        interleave(a, b, plan, timeout=arm_timeout)
        est = paired_speedup(a, b, confidence=plan.confidence)
        rates = [1.0 / statistics.median(x.chunk_scores) for x in (a, b)]
    finally:
        a.close()
        b.close()
    return rates[0], rates[1], est


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="mlp only")
    parser.add_argument("--budget", default=1800.0, type=float, help="tune budget (s)")
    args = parser.parse_args()
    workloads = ["mlp"] if args.quick else ["mlp", "gpt"]
    n_grid = len(list(itertools.product(*KNOBS.values())))
    rows = []
    for workload in workloads:
        print(f"{workload}: grid over {n_grid} recipes", flush=True)
        start = time.monotonic()
        measured = grid(workload, MeasurePlan())
        grid_s = time.monotonic() - start
        start = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            config = TuneConfig(
                workload=workload,
                # Exactly the grid's values (the CPU catalogue would add max-autotune).
                space=knob_space_config(
                    [KnobSpec(k, v, SAFETY[k], v[0]) for k, v in KNOBS.items()]
                ),
                search_batch=False,
                budget_s=args.budget,
            )
            result = tune(config=config, out=Path(tmp) / "run")
        tune_s = time.monotonic() - start
        tuned = _resolved(result.best_recipe)
        best_key = max(measured, key=lambda k: measured[k])
        print(f"  tune: {_key(tuned)} ({result.n_trials} trials, {tune_s:.0f} s)", flush=True)
        if _key(tuned) == best_key:
            print("  tuned recipe = grid best: the final A/B compares the recipe with itself")
        best_sps, tuned_sps, est = final_ab(workload, _recipe(best_key), tuned)
        rows.append(
            (
                workload,
                best_key,
                best_sps,
                _key(tuned),
                tuned_sps,
                est,
                result.n_trials,
                grid_s,
                tune_s,
            )
        )
    print()
    print(
        f"{'workload':8} {'grid best':42} {'samples/s':>10} {'tuned':42} {'samples/s':>10} "
        f"{'tuned/best [95% CI]':>22} {'grid':>11} {'tune':>11} {'tune time':>10}"
    )
    for workload, best_key, best_sps, tuned_key, tuned_sps, est, trials, grid_s, tune_s in rows:
        ci = f"{est.speedup:.1%} [{est.ci_low:.1%}, {est.ci_high:.1%}]"
        print(
            f"{workload:8} {best_key:42} {best_sps:10.1f} {tuned_key:42} {tuned_sps:10.1f} "
            f"{ci:>22} {n_grid:3d} / {grid_s:4.0f}s {trials:3d} / {tune_s:4.0f}s "
            f"{tune_s / grid_s:9.0%}"
        )
    print("tuned/best: median paired ratio of the final interleaved A/B (target >= 95%);")
    print("grid / tune: recipes or trials / wall time; tune time: tune's wall time / grid's.")


if __name__ == "__main__":
    main()
