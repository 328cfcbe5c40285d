"""`torchdoctor diff A B`: what changed between two runs, two tuning results or two traces."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from torchdoctor.cli.main import app
from torchdoctor.cli.options import check_out, force_option, out_option
from torchdoctor.cli.state import emit, err_console
from torchdoctor.core.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from rich.console import Console


@app.command()
def diff(
    a: Path = typer.Argument(
        ..., metavar="A", help="The earlier run folder, tuning result or trace."
    ),
    b: Path = typer.Argument(..., metavar="B", help="The later one, of the same kind."),
    out: Path | None = out_option(),
    force: bool = force_option(),
    report: bool = typer.Option(
        True,
        "--report/--no-report",
        help="Write a run folder with diff.json and the report (--no-report: print only).",
    ),
) -> None:
    """What changed from A to B: the step and its phases, the ops and kernels that moved most,
    each with its 95% interval where both sides hold several steps, and the findings that
    appeared or went away.

    A and B are two run folders (diagnose, run, profile, or a trainer callback's), two tuning
    results (a tune or demo folder, or its tune.json), or two profiler traces (.json or
    .json.gz, any recent PyTorch, CPU, CUDA or ROCm; an analyze folder: diff its traces).
    Nothing is run: the records are compared.

        torchdoctor diff yesterday/ today/
        torchdoctor diff before.json.gz after.json.gz --json

    A change is called significant when its interval excludes no change and it moves at least
    5% of A's median step; the intervals cover the spread between steps within each run, not
    between two processes of one job.

    Exit code 1 when B is slower than A (its step significantly longer, or a throughput
    significantly lower), so that a CI job can gate on it; 0 otherwise.
    """
    if out is not None and not report:
        raise UsageError("--out writes a run folder, --no-report asks for none", hint="pick one")
    check_out(out, force=force)
    from torchdoctor.api import diff as diff_api
    from torchdoctor.api import write_diff

    result = diff_api(a, b, report=False)  # bad input fails before a run folder is made

    def render(console: Console) -> None:
        from torchdoctor.report import render_records

        render_records(console, {"diff": result})

    emit(result, render)
    if report:
        from torchdoctor.cli.reporting import write_run_reports

        write_diff(result, a, b, out=out, reports=write_run_reports)
    if result.regressed:
        err_console.print(f"regression: B is slower than A: {result.verdict}", highlight=False)
        raise typer.Exit(ExitCode.FINDINGS)
