"""`torchdoctor run WORKLOAD`: train a workload under a recipe; show where each step's time goes.

`torchdoctor run [--recipe R] -- python train.py ARGS`: run a script unmodified, as it is or
with the recipe injected; with `--vs-baseline`, the recipe against the script as it is in
fresh process pairs (cli/script_run.py).
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

from torchdoctor.cli.main import app
from torchdoctor.cli.options import (
    default_device,
    device_option,
    parse_workload_params,
    seed_option,
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


@app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": False})
def run_command(
    ctx: typer.Context,
    workload: str | None = typer.Argument(
        None, help="Built-in name (see `workloads`) or file.py:factory; or -- python train.py."
    ),
    recipe_file: Path | None = typer.Option(
        None,
        "--recipe",
        help="For a script: JSON knob values to inject (tune's best_recipe.json or tune.json); "
        "without it the script is measured as it is.",
    ),
    vs_baseline: bool = typer.Option(
        False,
        "--vs-baseline",
        help="For a script with --recipe: measure the recipe against the script as it is in "
        "fresh process pairs, as tune's final A/B does, and print the ratio with its interval.",
    ),
    pairs: int = typer.Option(
        DEFAULT_REPLICATES,
        "--pairs",
        min=MIN_REPLICATES,
        help="With --vs-baseline: fresh process pairs (each launches the script twice).",
    ),
    out: Path | None = typer.Option(None, "--out", help="For a script: run folder to write."),
    settings: list[str] = typer.Option(
        [], "--set", help="Knob setting knob=value (repeatable), e.g. --set compile=default."
    ),
    params: list[str] = typer.Option(
        [], "--param", help="Workload parameter name=value, e.g. --param decode_cost_us=0."
    ),
    steps: int | None = typer.Option(
        None,
        "--steps",
        min=1,
        help=f"Steady-state steps to measure (default: at least {DEFAULT_STEADY_STEPS} and at "
        f"least {MIN_STEADY_S:g} s of them, the window the tuner times); for a script: end it "
        "after N steps.",
    ),
    warmup: int = typer.Option(
        MIN_WARMUP_STEPS,
        "--warmup",
        min=0,
        help="Least warm-up steps (compile happens here); more run until step times settle "
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
    """
    # Everything after `--` is positional to click: its first word lands in `workload`.
    command = [workload, *ctx.args] if workload is not None and ctx.args else list(ctx.args)
    if command or recipe_file is not None or vs_baseline:
        from torchdoctor.cli.script_run import recheck_recipe, run_script_with_recipe

        if not command and workload is not None:
            command = [workload]  # `run --recipe R -- train.py`: a script without arguments
        if not command:
            raise UsageError(
                "no script to run", hint="torchdoctor run --recipe R -- python train.py"
            )
        if vs_baseline:
            recheck_recipe(command, recipe_file, pairs=pairs, steps=steps, out=out)
            return
        run_script_with_recipe(command, recipe_file, steps=steps, warmup=warmup, out=out)
        return
    if workload is None:
        raise UsageError("nothing to run", hint="torchdoctor run WORKLOAD, or -- python train.py")
    from torchdoctor.engine import run_workload
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads import get_workload

    device = default_device(device)
    job = get_workload(workload, **parse_workload_params(params))
    recipe = Recipe.parse(settings, workload=job, device=device)

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
    task = bar.add_task(f"{job.name}: {recipe.describe()}", total=planned) if bar else None

    def progress(done: int, total: int) -> None:
        if bar is not None and task is not None:
            bar.update(task, completed=done, total=total)

    from torchdoctor.measure import watch_load

    with bar if bar is not None else nullcontext(), watch_load() as load:
        result = run_workload(
            job,
            recipe,
            steps=steps,
            warmup_steps=warmup,
            measure_phases=not throughput,
            device=device,
            seed=seed,
            progress=progress,
        )
    result = result.model_copy(update={"machine_load": load.reading})

    def render(console: Console) -> None:
        from torchdoctor.report import render_run

        render_run(console, result)

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
