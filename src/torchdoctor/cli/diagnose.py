"""`torchdoctor diagnose`: name the bottleneck of a script, a workload or a trace.

torchdoctor diagnose [--steps N] [--warmup K] [--profile-steps M] [--out DIR] -- python train.py ...
torchdoctor diagnose WORKLOAD [--set knob=value ...] [--memory]
torchdoctor diagnose TRACE.json[.gz] | TRACE_FOLDER

A torchrun launch (`-- torchrun --nproc_per_node 2 train.py`) or a folder of per-rank traces
is diagnosed as one job: its ranks compared (per-rank step, skew at the collectives,
stragglers and their cause) and one diagnosis (`--json`: one JobDiagnosis document).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from torchdoctor.api import examine, parse_command
from torchdoctor.cli.main import app
from torchdoctor.cli.options import (
    DEVICE_HELP,
    check_out,
    default_device,
    device_option,
    force_option,
    out_option,
    param_option,
    parse_settings,
    parse_workload_params,
    refuse_given,
    warmup_option,
)
from torchdoctor.cli.reporting import write_run_reports
from torchdoctor.cli.state import console, emit, err_console
from torchdoctor.cli.state import settings as cli_settings
from torchdoctor.core.defaults import (
    DIAGNOSE_PROFILE_STEPS,
    DIAGNOSE_WARMUP,
)
from torchdoctor.core.errors import DiagnoseError, ScriptExit, UsageError
from torchdoctor.core.rundir import display_path
from torchdoctor.diagnose import Diagnosis

if TYPE_CHECKING:
    from torchdoctor.core.memory_owners import MemoryPlan


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": False},
    help="Name the bottleneck of a script (-- python train.py ...), a workload, or a trace. "
    "A torchrun job (-- torchrun --nproc_per_node 2 train.py) or a folder of per-rank traces "
    "gets one diagnosis of the job: each rank's step side by side, the skew at each "
    "collective, and stragglers named with their cause.",
)
def diagnose(
    ctx: typer.Context,
    target: str | None = typer.Argument(None, help="WORKLOAD name, or a TRACE file/folder."),
    steps: int | None = typer.Option(None, "--steps", help="End the script after N steps."),
    warmup: int = warmup_option(
        DIAGNOSE_WARMUP,
        "Here: before the profiled window, so that compilation and the allocator's growth "
        "stay out of it.",
    ),
    profile_steps: int = typer.Option(
        DIAGNOSE_PROFILE_STEPS, "--profile-steps", min=0, help="Steps to profile."
    ),
    out: Path | None = out_option(),
    force: bool = force_option(),
    set_: list[str] = typer.Option([], "--set", help="knob=value for a workload (repeatable)."),
    params: list[str] = param_option(),
    device: str | None = device_option(f"For a workload: {DEVICE_HELP} A script picks its own."),
    memory: bool = typer.Option(
        False,
        "--memory",
        help="For a workload: also split a step's memory into its owners (parameters, "
        "gradients, optimizer state, activations, temporaries, allocator slack) at its batch "
        "and half of it: one line here, memory.json and a report section. `torchdoctor "
        "memory` predicts the largest batch under a budget. A script's last warm-up step "
        "is split so always, at its own batch.",
    ),
) -> None:
    # Everything after `--` is positional to click: its first word lands in `target`.
    command = [target, *ctx.args] if target is not None and ctx.args else list(ctx.args)
    if target is not None and not ctx.args and target.endswith(".py"):
        command = [target]  # `torchdoctor diagnose -- train.py`: a script without arguments
    _refuse_what_the_target_ignores(ctx, command, target)
    check_out(out, force=force)
    if memory and (command or target is None or Path(target).exists()):
        raise UsageError(
            "--memory applies to a workload only",
            hint="torchdoctor diagnose WORKLOAD --memory, or torchdoctor memory WORKLOAD",
        )
    if target is None and not command:
        raise UsageError("nothing to diagnose", hint="torchdoctor diagnose -- python train.py")
    settings = parse_settings(set_)
    exam = examine(
        parse_command(command) if command else None,
        str(target),
        settings=settings,
        params=parse_workload_params(params),
        steps=steps,
        warmup=warmup,
        profile_steps=profile_steps,
        device=device,
        out=out,
        stdout_to_stderr=cli_settings.json,  # --json: stdout holds the record only
    )
    job = exam.job
    if job is not None:  # several ranks: one diagnosis of the job, its ranks inside

        def render_whole(c: Console) -> None:
            from torchdoctor.report import render_job

            render_job(job, c, exam.run_dir)

        emit(job, render_whole)
    for i, d in enumerate([] if job is not None else exam.diagnoses):
        last = i == len(exam.diagnoses) - 1

        def render(c: Console, d: Diagnosis = d, last: bool = last) -> None:
            from torchdoctor.report import render_records, render_run_folder

            render_records(c, {"diagnosis": d})
            if last:
                render_run_folder(c, exam.run_dir)

        emit(d, render)
    plan = exam.memory  # a script's step, split into its owners
    if memory and target is not None and exam.diagnoses and not exam.error:
        plan = memory_beside(
            target, settings, default_device(device), exam.run_dir, parse_workload_params(params)
        )
    if plan is not None:
        from torchdoctor.report import memory_summary

        (err_console if cli_settings.json else console).print(
            memory_summary(plan), highlight=False, markup=False, soft_wrap=True
        )
    if exam.diagnoses:
        write_run_reports(exam.run_dir)
    else:
        err_console.print(f"whatever was measured is in {display_path(exam.run_dir)}")
    code = exam.exit_code
    if code not in (None, 0):
        raise ScriptExit(exam.error or f"the script exited with code {code}", script_code=int(code))
    if exam.error:
        where = display_path(exam.run_dir)
        raise DiagnoseError(exam.error, hint=f"what was measured is in {where}")


def _refuse_what_the_target_ignores(
    ctx: typer.Context, command: list[str], target: str | None
) -> None:
    """A script picks its own recipe and device; a trace was measured already."""
    if command:
        refuse_given(
            ctx,
            ("set_", "params", "device"),
            case="for a script",
            hint="a script's recipe and device are its own (`torchdoctor run --recipe R -- ...` "
            "runs one with a recipe)",
        )
    elif target is not None and Path(target).exists() and not target.endswith(".py"):
        refuse_given(
            ctx,
            ("steps", "warmup", "profile_steps", "set_", "params", "device"),
            case="for a trace",
            hint="a trace is read as it was recorded",
        )


def memory_beside(
    workload: str,
    settings: dict[str, str],
    device: str,
    run_dir: Path,
    params: dict[str, Any] | None = None,
) -> MemoryPlan:
    """`diagnose WORKLOAD --memory`: the owners at the diagnosed batch and half of it, written
    to the diagnosis's run folder (memory.json, so its report shows them)."""
    from torchdoctor.analyze import study_memory
    from torchdoctor.core.rundir import MEMORY
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads import get_workload

    job = get_workload(workload, **(params or {}))
    others = [f"{k}={v}" for k, v in settings.items() if k != "batch_size"]
    recipe = Recipe.parse(others, workload=job, device=device)
    batch = int(settings.get("batch_size", job.default_batch_size))
    sizes = [max(1, batch // 2), batch] if batch > 1 else [1, 2]
    plan = study_memory(job, batch_sizes=sizes, device=device, recipe=recipe)
    plan.write(run_dir / MEMORY)
    return plan
