"""`torchdoctor profile WORKLOAD`: trace a window of steps, count FLOPs, analyze the trace.

Writes a run folder: trace.json.gz (Kineto, opens in Perfetto / TensorBoard),
profile_summary.json (`ProfileCapture`: window, FLOPs per op and module, memory),
analysis.json (`TraceAnalysis` of the trace) and, when the report stage is installed,
report.html / report.md.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from torchdoctor.cli.main import app
from torchdoctor.cli.options import (
    check_out,
    device_option,
    force_option,
    knob_values,
    out_option,
    param_option,
    parse_workload_params,
    seed_option,
    warmup_option,
)
from torchdoctor.cli.reporting import write_run_reports
from torchdoctor.cli.state import emit
from torchdoctor.core.defaults import PROFILE_ACTIVE, PROFILE_WAIT, PROFILE_WARMUP


@app.command("profile")
def profile_command(
    workload: str = typer.Argument(..., help="Built-in name (see `workloads`) or file.py:factory."),
    settings: list[str] = typer.Option(
        [], "--set", help="Knob setting knob=value (repeatable), e.g. --set batch_size=64."
    ),
    params: list[str] = param_option(),
    wait: int = typer.Option(PROFILE_WAIT, "--wait", min=0, help="Steps run unprofiled first."),
    warmup: int = warmup_option(
        PROFILE_WARMUP,
        "Here: the profiler's warm-up (torch.profiler's schedule), after --wait, so that its "
        "own start-up stays out of the trace.",
    ),
    active: int = typer.Option(
        PROFILE_ACTIVE, "--active", min=1, help="Steps recorded in the trace."
    ),
    out: Path | None = out_option(),
    force: bool = force_option(),
    seed: int = seed_option(),
    device: str | None = device_option(),
    ceilings: bool = typer.Option(
        True,
        "--ceilings/--no-ceilings",
        help="Judge ops against this machine's measured ceilings (measured once, cached).",
    ),
) -> None:
    """Profile a window of WORKLOAD's steps: Kineto trace, FLOPs per op/module, memory."""
    check_out(out, force=force)
    from torchdoctor.api import profile

    run_dir, capture, analysis = profile(
        workload,
        recipe=knob_values(settings),
        params=parse_workload_params(params),
        wait=wait,
        warmup=warmup,
        active=active,
        seed=seed,
        device=device,
        ceilings=ceilings,
        out=out,
    )

    def render(console: Console) -> None:
        from torchdoctor.report import render_profile

        render_profile(console, run_dir, capture, analysis)

    emit(
        {
            "run_dir": str(run_dir),
            "profile": capture.to_json_dict(),
            "analysis": analysis.to_json_dict(),
        },
        render,
    )
    write_run_reports(run_dir)
