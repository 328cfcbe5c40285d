"""`torchdoctor profile WORKLOAD`: trace a window of steps, count FLOPs, analyze the trace.

Writes a run folder: trace.json.gz (Kineto, opens in Perfetto / TensorBoard),
profile_summary.json (`ProfileCapture`: window, FLOPs per op and module, memory),
analysis.json (`TraceAnalysis` of the trace) and, when the report stage is installed,
report.html / report.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from torchdoctor.cli.main import app
from torchdoctor.cli.options import (
    check_out,
    default_device,
    device_option,
    force_option,
    out_option,
    param_option,
    parse_workload_params,
    seed_option,
    warmup_option,
)
from torchdoctor.cli.reporting import write_run_reports
from torchdoctor.cli.state import emit, err_console
from torchdoctor.core.defaults import PROFILE_ACTIVE, PROFILE_WAIT, PROFILE_WARMUP
from torchdoctor.core.errors import TorchDoctorError


def _ceilings(device: str) -> Any | None:
    """This machine's measured ceilings (cached after the first measurement), or None."""
    from torchdoctor.measure import get_ceilings

    try:
        return get_ceilings(device="cuda" if device.startswith("cuda") else "cpu")
    except TorchDoctorError as exc:
        err_console.print(f"[yellow]warning:[/] ceilings unavailable: {exc}", highlight=False)
        return None


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
    from torchdoctor.analyze import analyze_trace
    from torchdoctor.collect import PROFILE_SUMMARY, profile_workload
    from torchdoctor.core.rundir import ANALYSIS, TRACE, marking_outcome, new_run_dir
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads import get_workload

    check_out(out, force=force)
    device = default_device(device)
    job = get_workload(workload, **parse_workload_params(params))
    recipe = Recipe.parse(settings, workload=job, device=device)
    machine = _ceilings(device) if ceilings else None
    run_dir = new_run_dir("profile", job.name, out=out)
    with marking_outcome(run_dir):
        capture = profile_workload(
            job, recipe, run_dir, device=device, seed=seed, wait=wait, warmup=warmup, active=active
        )
        capture.write(run_dir / PROFILE_SUMMARY)
        analysis = analyze_trace(run_dir / TRACE, ceilings=machine)
        analysis.write(run_dir / ANALYSIS)

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
