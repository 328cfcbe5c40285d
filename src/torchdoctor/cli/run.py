"""`torchdoctor run WORKLOAD`: train a workload under a recipe; show where each step's time goes
(`torchdoctor.run`); with `--recipe R --vs-baseline`, the recipe against the workload as it is
in fresh process pairs.

`torchdoctor run [--recipe R] -- python train.py ARGS`: run a script unmodified, as it is or
with the recipe injected; with `--vs-baseline`, the recipe against the script as it is in
fresh process pairs (cli/script_run.py). Each calls its API function (`torchdoctor.run`,
or the steps `run_script_into` and `recheck_into` it shares with `torchdoctor.run` and
`torchdoctor.recheck`) and renders.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

from torchdoctor.cli.main import app
from torchdoctor.cli.options import (
    check_out,
    default_device,
    device_option,
    force_option,
    out_option,
    pairs_option,
    param_option,
    parse_settings,
    parse_workload_params,
    refuse_given,
    seed_option,
    warmup_option,
)
from torchdoctor.cli.state import emit, err_console, progress_enabled
from torchdoctor.core.errors import EngineError, UsageError
from torchdoctor.measure import (
    DEFAULT_REPLICATES,
    DEFAULT_STEADY_STEPS,
    MIN_REPLICATES,
    MIN_STEADY_S,
    MIN_WARMUP_STEPS,
)

if TYPE_CHECKING:
    from torchdoctor.engine import RunResult


@app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": False})
def run_command(
    ctx: typer.Context,
    workload: str | None = typer.Argument(
        None, help="Built-in name (see `workloads`) or file.py:factory; or -- python train.py."
    ),
    recipe_file: Path | None = typer.Option(
        None,
        "--recipe",
        help="JSON knob values (tune's best_recipe.json, tune.json or its run folder): injected "
        "into a script, or a workload's recipe (--set adds to it); without it a script is "
        "measured as it is.",
    ),
    vs_baseline: bool = typer.Option(
        False,
        "--vs-baseline",
        help="With --recipe: measure the recipe against the script (or workload) as it is in "
        "fresh process pairs, as tune's final A/B does, and print the ratio with its interval.",
    ),
    pairs: int = pairs_option(
        DEFAULT_REPLICATES, MIN_REPLICATES, "With --vs-baseline: how many to run."
    ),
    out: Path | None = out_option(
        "Run folder to write (a script's run, or --vs-baseline's A/B; default: a new one under "
        "torchdoctor-runs/)."
    ),
    force: bool = force_option(),
    settings: list[str] = typer.Option(
        [], "--set", help="Knob setting knob=value (repeatable), e.g. --set compile=default."
    ),
    params: list[str] = param_option(),
    steps: int | None = typer.Option(
        None,
        "--steps",
        min=1,
        help=f"Steady-state steps to measure (default: at least {DEFAULT_STEADY_STEPS} and at "
        f"least {MIN_STEADY_S:g} s of them, the window the tuner times); for a script: end it "
        "after N steps.",
    ),
    warmup: int = warmup_option(
        MIN_WARMUP_STEPS,
        "The least before timing (compile happens here); more run until step times settle "
        "within 10%, as the tuner warms up.",
    ),
    seed: int = seed_option(),
    device: str | None = device_option(),
    throughput: bool = typer.Option(
        False,
        "--throughput",
        help="Skip the extra synchronized steps that time the phases (no phase table).",
    ),
) -> None:
    """Run WORKLOAD under a recipe: throughput, compile time, phase breakdown, memory.

    Throughput comes from STEPS steady-state steps timed without per-phase syncs (the median
    over chunks of at least 0.3 s, as the tuner measures a recipe); the phase table from up
    to 10 further steps that synchronize at every phase boundary.

    Without --steps at least 3 s of steady steps are timed (and at least 30): the window each
    process of the tuner's confirmation times, so a fast model is not judged on a fraction
    of a second.

    pin_memory and non_blocking only act on CUDA copies: on a CPU device they are rejected.
    If the loss becomes NaN or infinite the result is still shown (non-finite losses as
    null), followed by one error line, and the exit code is 2.

    Your own script, unmodified, as it is or with a recipe injected (a tune's
    best_recipe.json, or its run folder), its steady throughput measured by the same rule as
    the tuner's:

        torchdoctor run -- python train.py ARGS
        torchdoctor run --recipe best_recipe.json -- python train.py ARGS

    To see a tuner's speedup for yourself: the recipe against the script as it is, in fresh
    process pairs timed in alternating chunks (the tuner's final A/B), the ratio with its
    95% interval over the pairs:

        torchdoctor run --recipe best_recipe.json --vs-baseline -- python train.py ARGS

    A torchrun job's recipe the same way, each job of a pair on a rendezvous of its own
    (torchrun --standalone), as the tuner ran its arms:

        torchdoctor run --recipe RUN --vs-baseline -- torchrun --nproc_per_node 2 train.py

    A workload's recipe too (--set adds to it), alone or against the workload as it is:

        torchdoctor run cnn --recipe RUN
        torchdoctor run cnn --recipe RUN --vs-baseline
    """
    # Everything after `--` is positional to click: its first word lands in `workload`.
    command = [workload, *ctx.args] if workload is not None and ctx.args else list(ctx.args)
    if not command and workload is not None and workload.endswith(".py") and ":" not in workload:
        command = [workload]  # `run --recipe R -- train.py`: a script without arguments
    _refuse_what_the_case_ignores(ctx, script=bool(command), vs_baseline=vs_baseline)
    if vs_baseline and recipe_file is None:
        raise UsageError(
            "--vs-baseline needs --recipe: the recipe to measure against the job as it is",
            hint="torchdoctor run --recipe best_recipe.json --vs-baseline -- python train.py",
        )
    if command:
        from torchdoctor.cli.script_run import recheck, run_script_with_recipe

        check_out(out, force=force)
        if vs_baseline and recipe_file is not None:  # refused above without it
            recheck(command, recipe_file, pairs=pairs, steps=steps, out=out)
            return
        run_script_with_recipe(command, recipe_file, steps=steps, warmup=warmup, out=out)
        return
    if workload is None:
        raise UsageError("nothing to run", hint="torchdoctor run WORKLOAD, or -- python train.py")
    from torchdoctor.api import load_recipe_file

    recipe = load_recipe_file(recipe_file) if recipe_file is not None else {}
    recipe.update(parse_settings(settings))
    if vs_baseline:
        from torchdoctor.cli.script_run import recheck

        check_out(out, force=force)
        recheck(
            workload,
            recipe,
            pairs=pairs,
            steps=steps,
            seed=seed,
            device=default_device(device),
            out=out,
        )
        return
    refuse_given(
        ctx,
        ("out", "force"),
        case="for a workload's run",
        hint="it writes no run folder (--json prints its record); --vs-baseline's A/B writes one",
    )
    _run_workload(
        workload,
        recipe,
        params=parse_workload_params(params),
        steps=steps,
        warmup=warmup,
        seed=seed,
        device=default_device(device),
        measure_phases=not throughput,
    )


def _refuse_what_the_case_ignores(ctx: typer.Context, *, script: bool, vs_baseline: bool) -> None:
    """Options this case cannot honour, refused in one line before anything runs."""
    if vs_baseline:
        refuse_given(
            ctx,
            ("warmup", "throughput", "params"),
            case="with --vs-baseline",
            hint="each process warms up until its step times settle, builds the job as it is, "
            "and only throughput is compared",
        )
    else:
        refuse_given(ctx, ("pairs",), case="without --vs-baseline", hint="add --vs-baseline")
    if script:
        refuse_given(
            ctx,
            ("settings", "params", "seed", "device", "throughput"),
            case="for a script",
            hint="a script's recipe comes from --recipe; its parameters, seed and device are "
            "its own",
        )


def _run_workload(
    workload: str,
    recipe: dict[str, Any],
    *,
    params: dict[str, Any],
    steps: int | None,
    warmup: int,
    seed: int,
    device: str,
    measure_phases: bool,
) -> None:
    """`run WORKLOAD`: `torchdoctor.run` with a progress bar on a terminal, then the record."""
    from torchdoctor.api import run

    bar: Progress | None = None
    if progress_enabled():
        bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err_console,
            transient=True,
        )
    planned = (steps or DEFAULT_STEADY_STEPS) + warmup  # grows with warm-up and the 3 s window
    task = bar.add_task(f"run {workload}", total=planned) if bar else None

    def progress(done: int, total: int) -> None:
        if bar is not None and task is not None:
            bar.update(task, completed=done, total=total)

    with bar if bar is not None else nullcontext():
        # A workload's name (a command line went to cli/script_run.py): its run's RunResult.
        result = cast(
            "RunResult",
            run(
                workload,
                recipe=recipe,
                params=params,
                steps=steps,
                warmup=warmup,
                measure_phases=measure_phases,
                device=device,
                seed=seed,
                progress=progress,
            ),
        )

    def render(console: Console) -> None:
        from torchdoctor.report import render_records

        render_records(console, {"run_result": result})

    emit(result, render)
    message = result.divergence_message()
    if message is not None:
        # The record is printed first (its timings are real and --json readers get
        # nonfinite_loss_step); then the run fails, because a training job whose loss is NaN
        # or infinite is broken whatever its speed.
        raise EngineError(
            message,
            hint="lower the learning rate or use precision=bf16/fp32 "
            "(fp16 overflows where bf16 does not)",
        )
