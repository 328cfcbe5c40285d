"""Tuning a script vs tuning the equivalent workload: the same recipe, side by side in one run.

`benchmarks/scripts/cnn_train.py` is the built-in `cnn` workload written as a plain training
script (the workload's own model, data, loss and optimizer; the engine's seed, loader and
batch size; an ordinary loop with no torchdoctor call in it). Both are tuned over the same
knobs with the same budget, one after the other (never at once), each in its own
`torchdoctor --json tune` process:

1. `torchdoctor tune cnn --knobs precision,channels_last --no-diagnose --no-batch-search`;
2. `torchdoctor tune --knobs precision,channels_last -- python benchmarks/scripts/cnn_train.py
   --steps N` (the script driven at its optimizer steps, the knobs injected).

Printed: each recipe with its confirmed speedup and interval, whether the two recipes are the
same, and each tried change's A/B (speedup over the recipe it was tried on, its interval and
the decision) side by side. Both run folders are kept, and printed.

    python benchmarks/bench_script_vs_workload.py                 # budget 600 s each
    python benchmarks/bench_script_vs_workload.py --budget 300
    python benchmarks/bench_script_vs_workload.py --quick         # a smoke, 180 s each
    python benchmarks/bench_script_vs_workload.py --reuse WORKLOAD_RUN SCRIPT_RUN  # re-print

From the repository root, with torchdoctor importable by this interpreter (installed, or
`PYTHONPATH=src`): the script imports the workload, and the tuner launches it with this
interpreter and environment. It takes at most the two budgets plus the trial in flight at
each deadline, about 20 minutes at the default; each tune ends sooner once its ladder and
confirmation are done.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from torchdoctor.knobs import get_knob
from torchdoctor.tune import TuneResult

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path("benchmarks/scripts/cnn_train.py")
#: precision and memory format: cnn's two wins on a CPU (bench_tune_vs_grid's grid for cnn;
#: RESULTS.md), and both act on a script through injection (autocast and channels_last on its
#: trained model, collect/inject/trained_model.py). The batch size is not among them: a script's
#: batch is its own, so `tune --` runs no batch search, and the workload's is turned off to match.
KNOBS = ("precision", "channels_last")
#: Seconds of budget each tune gets. The tune of cnn over these two knobs (ladder, quality
#: yardstick and the confirmation's fresh process pairs) took 100 s of tuning
#: (RESULTS.md, bench_tune_vs_grid cnn, 18:24); a script arm is a launch of the script, and its
#: yardstick six more, so the script's tune takes longer. The tuner stops once its ladder and
#: its confirmation are done, so this is a ceiling, not the time spent; the CLI's default.
DEFAULT_BUDGET_S = 600
#: `--quick`: a smoke that runs both tunes and reads their run folders back, not a result.
#: The tuner refuses (exit 2) a budget that cannot measure the baseline and its quality
#: yardstick: on a shared 2-core host (load average 3.7) cnn's took more than 95 s, and
#: budgets of 45 s and 90 s were refused.
QUICK_BUDGET_S = 180
#: The script's `--steps`: far more than one arm runs (at most a few trials of up to 24 rounds
#: of a few steps, plus 32 quality steps), so no arm restarts the script mid-chunk; and
#: bounded, so a script left behind by an interrupted run ends on its own.
SCRIPT_STEPS = 5000


def tune_args(budget_s: float, out: Path) -> list[str]:
    """The options both tunes share (the workload's no-diagnose and no-batch-search aside)."""
    return ["--budget", f"{budget_s:g}", "--knobs", ",".join(KNOBS), "--out", str(out)]


def run_tune(label: str, args: list[str]) -> Path:
    """`torchdoctor --json tune ARGS` from the repository root; the run folder (`--out`)."""
    cmd = [sys.executable, "-m", "torchdoctor", "--json", "tune", *args]
    print(f"{label}: torchdoctor tune {' '.join(args)}", flush=True)
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {' | '.join(tail)}")
    run_dir = Path(args[args.index("--out") + 1])
    print(f"  {time.monotonic() - start:.0f} s wall; run folder: {run_dir}", flush=True)
    return run_dir


def read_run(run_dir: Path) -> tuple[TuneResult, dict[str, Any]]:
    """The run folder's tune.json and best_recipe.json."""
    result = TuneResult.read(run_dir / "tune.json")
    best = json.loads((run_dir / "best_recipe.json").read_text())
    return result, dict(best)


def resolved(recipe: dict[str, Any], device: str) -> dict[str, Any]:
    """The recipe with each tuned knob's default filled in (the tuner stores changes only)."""
    filled = {name: get_knob(name).default_for(device) for name in KNOBS}
    return {**filled, **recipe}


def key(recipe: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(recipe.items())) or "(baseline)"


def trials(result: TuneResult) -> dict[str, str]:
    """Each tried change -> its A/B over the recipe it was tried on, and the decision."""
    rows: dict[str, str] = {}
    for rung in result.ladder.rungs:
        if rung.step == 0:
            continue
        low, high = rung.speedup_vs_previous_ci
        rows[key(rung.change)] = f"{rung.speedup_vs_previous:.3f}x [{low:.3f}, {high:.3f}] kept"
    for rejection in result.ladder.rejected:
        if rejection.speedup_vs_best is not None and rejection.speedup_vs_best_ci is not None:
            low, high = rejection.speedup_vs_best_ci
            ab = f"{rejection.speedup_vs_best:.3f}x [{low:.3f}, {high:.3f}]"
        else:
            ab = "no A/B" if rejection.status == "ok" else rejection.status
        rows.setdefault(key(rejection.change), f"{ab} rejected")
    return rows


#: Characters of a rejection's reason printed under the table (the run folder has them whole).
REASON_CHARS = 110


def report(workload_dir: Path, script_dir: Path) -> None:
    runs = {"workload": read_run(workload_dir), "script": read_run(script_dir)}
    print()
    print(
        f"{'tuned':8} {'best recipe':40} {'speedup [95% CI]':>24} {'samples/s':>20} {'trials':>7}"
    )
    recipes = {}
    for label, (result, best) in runs.items():
        recipes[label] = resolved(best, result.device)
        low, high = result.speedup_ci
        claim = f"{result.speedup:.3f}x [{low:.3f}, {high:.3f}]"
        rates = f"{result.baseline_samples_per_s:,.1f} -> {result.best_samples_per_s:,.1f}"
        print(f"{label:8} {key(recipes[label]):40} {claim:>24} {rates:>20} {result.n_trials:7d}")
        spent = f"{result.elapsed_s:.0f} s of {result.budget_s:.0f} s"
        exhausted = ", budget exhausted" if result.budget_exhausted else ""
        print(f"{'':8} {result.workload} on {result.device}, {spent}{exhausted}")
        for note in result.notes:
            print(f"{'':8} note: {note}")
    same = recipes["workload"] == recipes["script"]
    print(f"same recipe: {'yes' if same else 'NO'}")
    print("speedup: the tuner's confirmation (best over baseline, fresh process pairs);")
    print("samples/s: baseline -> best, as each tune measured them.")
    print()
    rows = {label: trials(result) for label, (result, _) in runs.items()}
    changes = list(dict.fromkeys([*rows["workload"], *rows["script"]]))
    print(f"{'change':28} {'workload: A/B [CI], decision':38} {'script: A/B [CI], decision':38}")
    for change in changes:
        cells = [rows[label].get(change, "not tried") for label in ("workload", "script")]
        print(f"{change:28} {cells[0]:38} {cells[1]}")
    print("A/B: the change over the recipe it was tried on (the ladder's sequential A/B).")
    for label, (result, _) in runs.items():
        for rejection in result.ladder.rejected:
            reason = " ".join(rejection.reason.split())[:REASON_CHARS]
            print(f"  {label} rejected {key(rejection.change)}: {reason}")
    print(f"run folders: workload {workload_dir}, script {script_dir}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=None, help="tune budget per side (s)")
    parser.add_argument("--quick", action="store_true", help=f"budget {QUICK_BUDGET_S} s each")
    parser.add_argument(
        "--reuse", nargs=2, type=Path, metavar=("WORKLOAD_RUN", "SCRIPT_RUN"),
        help="finished tune run folders: print their comparison, tune nothing",
    )  # fmt: skip
    args = parser.parse_args()
    if args.reuse is not None:
        report(args.reuse[0].resolve(), args.reuse[1].resolve())
        return
    budget_s = args.budget or (QUICK_BUDGET_S if args.quick else DEFAULT_BUDGET_S)
    if budget_s <= 0:
        parser.error(f"--budget must be positive, got {budget_s:g}")
    # Kept after the run (their trials say why each change was kept or not), and printed.
    work = Path(tempfile.mkdtemp(prefix="bench-script-vs-workload-"))
    workload_dir, script_dir = work / "workload", work / "script"
    # A script gets no diagnosis before tuning, so its ladder tries the knobs in the default
    # order; the workload's skips its diagnosis too, so both try them in the same order.
    run_tune(
        "workload",
        ["cnn", *tune_args(budget_s, workload_dir), "--no-diagnose", "--no-batch-search"],
    )
    command = ["python", str(SCRIPT), "--steps", str(SCRIPT_STEPS)]
    run_tune("script", [*tune_args(budget_s, script_dir), "--", *command])
    report(workload_dir, script_dir)


if __name__ == "__main__":
    main()
