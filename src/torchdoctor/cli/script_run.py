"""`torchdoctor run [--recipe R] -- python train.py ARGS`: the script, unmodified, as it is or
with a recipe injected (`torchdoctor.api.run_script_into`), rendered: steady step time,
throughput, which knobs applied. Run folder: run.json (manifest), collect/ (the launch's
script_profile.json and injection.json), script_run.json (`ScriptRun`).

`--vs-baseline` (`recheck`): the recipe against the script, torchrun job or workload as it is,
in fresh process pairs (`torchdoctor.api.recheck_into`), rendered; run folder: run.json,
vs_baseline.json (`Confirmation`), logs/ (each launch's output).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from torchdoctor.api import load_recipe_file
from torchdoctor.cli.state import emit, err_console, settings
from torchdoctor.core.errors import MeasureError, ScriptExit
from torchdoctor.core.rundir import display_path

__all__ = ["load_recipe_file", "recheck", "run_script_with_recipe"]


def run_script_with_recipe(
    command: list[str],
    recipe_path: Path | None,
    *,
    steps: int | None,
    warmup: int,
    out: Path | None,
) -> None:
    """`run [--recipe R] -- python train.py`: the run's record, then the script's own exit
    code when it failed (`ScriptExit`)."""
    from torchdoctor.api import parse_command, recipe_folder, run_script_into, script_error

    # No recipe: the script as it is, measured by the same rule (nothing injected).
    recipe = load_recipe_file(recipe_path) if recipe_path is not None else {}
    run = run_script_into(
        parse_command(command),
        recipe,
        steps=steps,
        warmup=warmup,
        out=out,
        tuned_in=recipe_folder(recipe_path),
        note=_note,
        # --json: stdout holds the record only; the script's prints go to stderr.
        stdout_to_stderr=settings.json,
    )

    def render(console: Console) -> None:
        from torchdoctor.report import render_script_run

        render_script_run(console, run)

    emit(run, render)
    code = run.exit_code
    if code not in (None, 0):
        error = script_error(run)
        raise ScriptExit(error or f"the script exited with code {code}", script_code=int(code))


def recheck(
    target: str | list[str],
    recipe: Path | dict[str, Any],
    *,
    pairs: int,
    steps: int | None,
    out: Path | None,
    device: str | None = None,
    seed: int = 0,
) -> None:
    """`run --recipe R --vs-baseline` (a script's command line, or a workload with its
    recipe): the ratio and its interval, then `MeasureError` when the A/B gave none."""
    from torchdoctor.api import RECHECK_LOGS, plan_recheck, recheck_into

    plan = plan_recheck(
        target, recipe, pairs=pairs, steps=steps, device=device, seed=seed, note=_note
    )
    check, run_dir = recheck_into(plan, out, _quiet if settings.json else _say)

    def render(console: Console) -> None:
        from torchdoctor.report import render_recheck

        render_recheck(console, check, plan.shown)
        console.print(f"run folder: {escape(display_path(run_dir))}", soft_wrap=True)

    emit(check, render)
    if not check.ok:
        raise MeasureError(
            f"the A/B gave no interval: {check.reason or check.status}",
            hint=f"each launch's output is in {display_path(run_dir / RECHECK_LOGS)}",
        )


def _note(text: str) -> None:
    err_console.print(f"note: {text}", highlight=False, soft_wrap=True)


def _say(text: str) -> None:
    err_console.print(text, highlight=False, soft_wrap=True)


def _quiet(text: str) -> None:
    """--json: stderr carries no progress."""
