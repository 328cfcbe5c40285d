"""Tune an unmodified training script, then re-measure its claim and its patch, in one run.

For a script command (run from its own folder, as its README says):

1. `torchdoctor tune --budget B --out RUN -- python SCRIPT ARGS`: the tuner's recipe and its
   claimed speedup with the interval (the final confirmation over fresh process pairs);
2. an independent re-measurement with `torchdoctor run --recipe`: the baseline (an empty
   recipe) and the tuned recipe alternately, each a fresh process, `REMEASURE_PAIRS` pairs;
   the geometric mean of the pair ratios against the tuner's interval;
3. the patch (`tune.patch.build_patch` from the injection record of the tuned run) applied with
   `patch -p1` to a copy of the script's folder; the patched copy and an unpatched copy then
   run alternately under `torchdoctor run` with an empty recipe (nothing injected, the same
   instrumentation on both), `REMEASURE_PAIRS` pairs: the patched script's own speedup.

    python benchmarks/bench_script_tune.py --cwd benchmarks/scripts/makemore --budget 300 \\
        --steps 60 -- python makemore.py -i names.txt -o out
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: `torchdoctor run --recipe` pairs (baseline, tuned), each a fresh process.
REMEASURE_PAIRS = 3


def torchdoctor(args: list[str], *, cwd: Path) -> dict[str, Any]:
    """Run `torchdoctor --json ARGS` in `cwd`; its JSON result."""
    cmd = [sys.executable, "-m", "torchdoctor", *args[:1], "--json", *args[1:]]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {' | '.join(tail)}")
    return dict(json.loads(proc.stdout))


def run_rate(recipe_file: Path, command: list[str], *, steps: int, cwd: Path) -> tuple[float, Any]:
    """Steady samples/s of one fresh `torchdoctor run --recipe` of the script, and its record.

    Steps/s where no DataLoader tells the batch size (`run` reports no samples/s then; the
    tuner counts one sample a step), so that a ratio compares like with like.
    """
    out = Path(tempfile.mkdtemp(prefix="bench-script-run-")) / "run"
    run_args = ["run", "--recipe", str(recipe_file), "--steps", str(steps), "--out", str(out)]
    result = torchdoctor([*run_args, "--", *command], cwd=cwd)
    rate = result["samples_per_s"] or 1.0 / float(result["step_s_median"])
    return float(rate), result


def pairs(
    a: tuple[Path, Path], b: tuple[Path, Path], command: list[str], *, steps: int, label: str
) -> list[float]:
    """Ratios b / a of `REMEASURE_PAIRS` alternating pairs; a and b are (recipe file, cwd)."""
    ratios = []
    for i in range(REMEASURE_PAIRS):
        order = (a, b) if i % 2 == 0 else (b, a)
        rates = {}
        for side in order:
            rates[side] = run_rate(side[0], command, steps=steps, cwd=side[1])[0]
        ratios.append(rates[b] / rates[a])
        print(f"  {label} pair {i + 1}: {rates[a]:,.2f} -> {rates[b]:,.2f} per s", flush=True)
    return ratios


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cwd", type=Path, required=True, help="the script's folder")
    parser.add_argument("--budget", default="300", help="tune budget, e.g. 300 or 5m")
    parser.add_argument("--steps", type=int, default=60, help="steps per `run --recipe`")
    parser.add_argument("--knobs", default=None, help="only these knobs (comma-separated)")
    parser.add_argument("--reuse", type=Path, help="a finished tune run folder: skip step 1")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- python SCRIPT ARGS")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    cwd = args.cwd.resolve()
    work = Path(tempfile.mkdtemp(prefix="bench-script-"))
    run_dir = work / "tune"
    tune_args = ["tune", "--budget", str(args.budget), "--out", str(run_dir)]
    if args.knobs:
        tune_args += ["--knobs", args.knobs]
    print(f"tune: {' '.join(command)} (in {cwd})", flush=True)
    if args.reuse is not None:
        run_dir = args.reuse.resolve()
        result = json.loads((run_dir / "tune.json").read_text())
    else:
        result = torchdoctor([*tune_args, "--", *command], cwd=cwd)
    best, (low, high) = result["best_recipe"], result["speedup_ci"]
    print(f"  recipe {best}; tuner claims {result['speedup']:.3f}x [{low:.3f}, {high:.3f}]")
    spent = f"{result['elapsed_s']:.0f} s of {result['budget_s']:.0f} s"
    print(f"  {result['n_trials']} trials, {spent}")
    if not best:
        print("no change kept: nothing to re-measure")
        return
    empty = work / "empty.json"
    empty.write_text("{}\n")
    tuned = run_dir / "best_recipe.json"
    ratios = pairs((empty, cwd), (tuned, cwd), command, steps=args.steps, label="run --recipe")
    again = geomean(ratios)
    inside = "inside" if low <= again <= high else "OUTSIDE"
    print(f"re-measured by {REMEASURE_PAIRS} `run --recipe` pairs: {again:.3f}x, {inside}")

    # The patch, from the injection record of a run of the tuned recipe.
    from torchdoctor.collect import InjectionRecord
    from torchdoctor.tune.patch import build_patch

    _, record = run_rate(tuned, command, steps=args.steps, cwd=cwd)
    injection = InjectionRecord.read(Path(record["run_dir"]) / "collect" / "injection.json")
    script = cwd / command[1] if command[:1] == ["python"] else None
    cure = build_patch(best, injection, cwd, script=script)
    print(f"patch: {len(cure.edits)} edits, {len(cure.snippets)} snippets")
    print(cure.diff)
    if not cure.edits:
        return
    patched = work / "patched"
    plain = work / "plain"
    for copy in (patched, plain):
        shutil.copytree(cwd, copy, ignore=shutil.ignore_patterns("out", "__pycache__"))
    subprocess.run(["patch", "-p1"], input=cure.diff, text=True, cwd=patched, check=True)
    # Only the edited knobs are in the patch: the snippets' knobs are not, so the patched
    # script's speedup is that of its edits.
    ratios = pairs((empty, plain), (empty, patched), command, steps=args.steps, label="patched")
    print(f"patched script, run plainly (nothing injected): {geomean(ratios):.3f}x")


if __name__ == "__main__":
    main()
