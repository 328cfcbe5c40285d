"""`torchdoctor run --recipe R -- python train.py ARGS`: the script, unmodified, with a recipe
injected (collect/inject); what it did: steady step time, throughput, which knobs applied.

Run folder: run.json (manifest), collect/ (the launch's script_profile.json and
injection.json), script_run.json (`ScriptRun`).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from rich.console import Console

from torchdoctor.cli.state import emit, settings
from torchdoctor.core.errors import ScriptExit, TorchDoctorError, UsageError

#: File names a recipe is read from when --recipe names a `torchdoctor tune` run folder.
TUNE_BEST = "best_recipe.json"
SCRIPT_RUN = "script_run.json"
COLLECT_SUBDIR = "collect"


def load_recipe_file(path: Path) -> dict[str, Any]:
    """The knob dict in `path`: a bare {knob: value} (tune's best_recipe.json), a tune result
    (tune.json: its best_recipe), any record with a `recipe`, or a tune run folder.

    Raises UsageError (unreadable) or KnobError (unknown knob, bad value).
    """
    from torchdoctor.knobs import Recipe

    if path.is_dir():
        path = path / TUNE_BEST
    if not path.is_file():
        raise UsageError(
            f"recipe file {str(path)!r} not found",
            hint="pass a JSON file of knob values, e.g. best_recipe.json written by tune",
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"recipe file {str(path)!r} is not readable JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("best_recipe"), dict):
        data = data["best_recipe"]
    elif isinstance(data, dict) and isinstance(data.get("recipe"), dict):
        data = data["recipe"]
    if not isinstance(data, dict):
        raise UsageError(
            f"recipe file {str(path)!r} holds no knob values",
            hint='write it as {"knob": value, ...}, e.g. {"num_workers": 2}',
        )
    return Recipe.from_dict(data).to_dict()


def run_script_with_recipe(
    command: list[str],
    recipe_path: Path | None,
    *,
    steps: int | None,
    warmup: int,
    out: Path | None,
) -> None:
    from torchdoctor.cli.diagnose import _split_command
    from torchdoctor.collect import INJECTION_STEM, InjectionRecord, ScriptRun, run_script
    from torchdoctor.core import rundir
    from torchdoctor.measure import steady_rate, warmup_length

    if recipe_path is None:
        raise UsageError(
            "a script needs --recipe", hint="torchdoctor run --recipe best.json -- python train.py"
        )
    recipe = load_recipe_file(recipe_path)
    argv, module = _split_command(command)
    if out is not None and out.exists() and any(out.iterdir()):
        raise UsageError(f"--out {out} exists and is not empty", hint="pass a new folder")
    target = argv[0] if argv else "script"
    run_dir = rundir.new_run_dir("run", target, out=out)
    collect_dir = run_dir / COLLECT_SUBDIR
    try:
        profile = run_script(
            argv,
            module=module,
            steps=steps,
            warmup=warmup,
            profile_steps=0,
            out_dir=collect_dir,
            recipe=recipe,
            # --json: stdout holds the record only; the script's prints go to stderr.
            stdout_to_stderr=settings.json,
        )
    except TorchDoctorError as exc:
        rundir.finish_run_dir(run_dir, error=str(exc))
        raise
    rank = f".rank{profile.rank}" if profile.rank is not None else ""
    injection_file = collect_dir / f"{INJECTION_STEM}{rank}.json"
    injection = InjectionRecord.read(injection_file) if injection_file.exists() else None
    # The steady state by the rule `torchdoctor run WORKLOAD` and the tuner use: warm-up until
    # step times settle (a compiled forward recompiles once the instrumentation moves its
    # module hooks), then the median over chunks of at least 0.3 s, which one slow step cannot
    # move. At most half the steps go to warm-up, so a short run still gets a figure.
    skip = min(
        warmup_length([s.total_s for s in profile.steps], min_steps=warmup),
        len(profile.steps) // 2,
    )
    kept = list(profile.steps[skip:])
    known = bool(kept) and all(s.samples is not None for s in kept)
    throughput = steady_rate(kept) if known else None
    run = ScriptRun(
        argv=argv,
        module=module,
        recipe=recipe,
        run_dir=str(run_dir),
        exit_code=profile.exit_code,
        ended_by=profile.ended_by,
        error=profile.error,
        device=profile.device,
        steps=len(profile.steps),
        steady_steps=len(kept),
        step_s_median=statistics.median(s.total_s for s in kept) if kept else None,
        samples_per_s=throughput,
        injection=injection,
    )
    run.write(run_dir / SCRIPT_RUN)
    code = profile.exit_code
    error = profile.error or (f"the script exited with code {code}" if code else None)
    rundir.finish_run_dir(run_dir, error=error)

    def render(console: Console) -> None:
        from torchdoctor.report import render_script_run

        render_script_run(console, run)

    emit(run, render)
    if code not in (None, 0):
        raise ScriptExit(error or f"the script exited with code {code}", exit_code=int(code))
