"""`torchdoctor run [--recipe R] -- python train.py ARGS`: the script, unmodified, as it is or
with a recipe injected (collect/inject); what it did: steady step time, throughput, which knobs
applied.

Run folder: run.json (manifest), collect/ (the launch's script_profile.json and
injection.json), script_run.json (`ScriptRun`).

`--vs-baseline` (`recheck_recipe`): the recipe against the script as it is, in fresh process
pairs (`torchdoctor.tune.recheck`); run folder: run.json, vs_baseline.json (`Confirmation`),
logs/ (each launch's output).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from torchdoctor.cli.state import emit, err_console, settings
from torchdoctor.core.errors import MeasureError, ScriptExit, TorchDoctorError, UsageError
from torchdoctor.core.rundir import display_path

if TYPE_CHECKING:
    from torchdoctor.tune import Confirmation

#: File names a recipe is read from when --recipe names a `torchdoctor tune` run folder.
TUNE_BEST = "best_recipe.json"
SCRIPT_RUN = "script_run.json"
VS_BASELINE = "vs_baseline.json"
LOGS_SUBDIR = "logs"
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
    from torchdoctor.api import parse_command
    from torchdoctor.collect import (
        INJECTION_STEM,
        InjectionRecord,
        ScriptRun,
        check_ranks_agree,
    )
    from torchdoctor.core import rundir
    from torchdoctor.measure import steady_rate, warmup_length
    from torchdoctor.procs import run_script

    # No recipe: the script as it is, measured by the same rule (nothing injected).
    recipe = load_recipe_file(recipe_path) if recipe_path is not None else {}
    argv, module = parse_command(command)
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
    try:
        check_ranks_agree(collect_dir)  # a torchrun job: one recipe on every rank
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
    if recipe_path is not None:
        _note_world_size(recipe_path, profile.world_size, profile.dataloaders)
    code = profile.exit_code
    error = profile.error or (f"the script exited with code {code}" if code else None)
    rundir.finish_run_dir(run_dir, error=error)

    def render(console: Console) -> None:
        from torchdoctor.report import render_script_run

        render_script_run(console, run)

    emit(run, render)
    if code not in (None, 0):
        raise ScriptExit(error or f"the script exited with code {code}", script_code=int(code))


def recheck_recipe(
    command: list[str],
    recipe_path: Path | None,
    *,
    pairs: int,
    steps: int | None,
    out: Path | None,
) -> None:
    """`run --recipe R --vs-baseline -- python train.py`: the ratio and its interval."""
    from torchdoctor.api import parse_command
    from torchdoctor.tune import (
        ScriptCommand,
        check_tunable,
        is_torchrun,
        job_world_size,
        recheck_script,
    )

    if recipe_path is None:
        raise UsageError(
            "--vs-baseline needs --recipe: the recipe to measure against the script as it is",
            hint="torchdoctor run --recipe best_recipe.json --vs-baseline -- python train.py",
        )
    recipe = load_recipe_file(recipe_path)
    argv, module = parse_command(command)
    if not module and not Path(argv[0]).is_file():
        raise UsageError(
            f"script {argv[0]!r} not found", hint="e.g. -- python train.py, from its folder"
        )
    if is_torchrun(argv, module):
        # Each pair runs the two jobs at once, as the tuner's arms do: each gets a rendezvous
        # of its own (`tune.torchrun.arm_argv`), which a pinned port or a second node forbids.
        check_tunable(argv)
        # The pairs' ratio is this world size's: a recipe tuned at another one says so first.
        _note_world_size(recipe_path, job_world_size(argv), [])
    script = ScriptCommand(tuple(argv), module=module)
    _recheck_into_run_dir(
        argv[0],
        script.display(),
        lambda logs: recheck_script(script, recipe, pairs=pairs, steps=steps, log_dir=logs),
        pairs=pairs,
        out=out,
    )


def recheck_workload_recipe(
    workload: str,
    recipe: dict[str, Any],
    *,
    pairs: int,
    steps: int | None,
    seed: int,
    device: str,
    out: Path | None,
) -> None:
    """`run WORKLOAD --recipe R --vs-baseline`: the recipe against the workload as it is, each
    arm a fresh workload worker, as the tuner's final A/B; the same record and run folder as
    a script's."""
    from torchdoctor.knobs import Recipe
    from torchdoctor.tune import recheck_workload
    from torchdoctor.workloads import get_workload

    # A bad workload or knob fails here, before a run folder or a worker exists.
    checked = Recipe.from_dict(recipe, workload=get_workload(workload), device=device).to_dict()
    _recheck_into_run_dir(
        workload,
        f"{workload} on {device}",
        lambda logs: recheck_workload(
            workload, checked, device=device, pairs=pairs, steps=steps, seed=seed, log_dir=logs
        ),
        pairs=pairs,
        out=out,
    )


def _recheck_into_run_dir(
    target: str,
    shown: str,
    measure: Callable[[Path], Confirmation],
    *,
    pairs: int,
    out: Path | None,
) -> None:
    """Run the A/B `measure(logs)` into a new run folder (vs_baseline.json, logs/), show it."""
    from torchdoctor.core import rundir

    run_dir = rundir.new_run_dir("run", target, out=out)
    logs = run_dir / LOGS_SUBDIR
    logs.mkdir(exist_ok=True)
    if not settings.json:
        err_console.print(
            f"{shown}: {pairs} fresh process pairs, the recipe against it as it is (each pair "
            "starts it twice)",
            highlight=False,
            soft_wrap=True,
        )
    try:
        check = measure(logs)
    except TorchDoctorError as exc:
        rundir.finish_run_dir(run_dir, error=str(exc))
        raise
    check.write(run_dir / VS_BASELINE)
    rundir.finish_run_dir(run_dir, error=None if check.ok else check.reason or check.status)

    def render(console: Console) -> None:
        from torchdoctor.report import render_recheck

        render_recheck(console, check, shown)
        console.print(f"run folder: {escape(display_path(run_dir))}", soft_wrap=True)

    emit(check, render)
    if not check.ok:
        raise MeasureError(
            f"the A/B gave no interval: {check.reason or check.status}",
            hint=f"each launch's output is in {display_path(logs)}",
        )


def _note_world_size(recipe_path: Path, world_size: int | None, loaders: list[Any]) -> None:
    """A recipe tuned on a torchrun job run at another world size: said on stderr (the run's
    record is the run's own; `tune.world_size_note`)."""
    from torchdoctor.tune import world_size_note

    folder = recipe_path if recipe_path.is_dir() else recipe_path.parent
    note = world_size_note(folder, world_size, loaders[0].batch_size if loaders else None)
    if note is not None:
        err_console.print(f"note: {note}", highlight=False, soft_wrap=True)
