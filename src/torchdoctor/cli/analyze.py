"""`torchdoctor analyze TRACE`: where the time of a profiler trace went."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from torchdoctor.api import analyze as analyze_api
from torchdoctor.api import write_analysis
from torchdoctor.cli.main import app
from torchdoctor.cli.options import check_out, force_option, out_option
from torchdoctor.cli.state import emit, err_console
from torchdoctor.core.defaults import ANALYZE_TOP
from torchdoctor.core.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console


@app.command()
def analyze(
    trace: Path = typer.Argument(
        ..., help="A .json or .json.gz profiler trace, or a folder of per-rank traces."
    ),
    top: int = typer.Option(ANALYZE_TOP, "--top", help="How many ops to list (heaviest first)."),
    out: Path | None = out_option(),
    force: bool = force_option(),
    report: bool = typer.Option(
        True,
        "--report/--no-report",
        help="Write a run folder with analysis.json and the report (--no-report: print only).",
    ),
) -> None:
    """Where the time of a PyTorch profiler trace went: device timeline, step breakdown, ops."""
    if top < 1:
        raise UsageError(f"--top must be at least 1, got {top}")
    if out is not None and not report:
        raise UsageError("--out writes a run folder, --no-report asks for none", hint="pick one")
    check_out(out, force=force)
    # Analyze first: a trace that cannot be read leaves no run folder behind.
    result = analyze_api(trace, top=top, report=False)
    for warning in result.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)

    def render(console: Console) -> None:
        from torchdoctor.report import render_records

        render_records(console, {"analysis": result})

    emit(result, render)
    if report:
        from torchdoctor.cli.reporting import write_run_reports

        write_analysis(result, trace, out=out, reports=write_run_reports)
