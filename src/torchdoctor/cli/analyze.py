"""`torchdoctor analyze TRACE`: where the time of a profiler trace went."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from torchdoctor.cli.main import app
from torchdoctor.cli.options import check_out, force_option, out_option
from torchdoctor.cli.state import emit, err_console
from torchdoctor.core.defaults import ANALYZE_TOP
from torchdoctor.core.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from torchdoctor.analyze import TraceAnalysis

BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


def _load_analyzer() -> Callable[..., TraceAnalysis]:
    """`analyze_trace`, with numpy loaded on one BLAS thread if this is the first to load it.

    numpy's OpenBLAS starts a worker thread per core as it loads, and they spin-wait: ~60 ms
    of CPU (and, on a busy 2-core machine, ~70 ms of wall time) per `torchdoctor analyze`,
    which never calls BLAS. The variable is read only when the library loads, so it is set
    for the import and restored at once: the user's own setting, and the environment of
    anything started later, are left alone.
    """
    if "numpy" not in sys.modules and BLAS_THREADS_ENV not in os.environ:
        os.environ[BLAS_THREADS_ENV] = "1"
        try:
            import numpy  # noqa: F401
        finally:
            del os.environ[BLAS_THREADS_ENV]
    from torchdoctor.analyze import analyze_trace

    return analyze_trace


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
    result = _load_analyzer()(trace, top=top)
    for warning in result.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)

    def render(console: Console) -> None:
        from torchdoctor.report import render_records

        render_records(console, {"analysis": result})

    emit(result, render)
    if report:
        from torchdoctor.cli.reporting import write_run_reports
        from torchdoctor.core.rundir import ANALYSIS, finishing, new_run_dir

        run_dir = new_run_dir("analyze", str(trace), out=out)
        with finishing(run_dir, reports=lambda: write_run_reports(run_dir)):
            result.write(run_dir / ANALYSIS)
