"""`torchdoctor report RUN_DIR_OR_RECORD`: render a run folder's records as HTML, MD or JSON."""

from __future__ import annotations

from pathlib import Path

import typer

from torchdoctor.cli.main import app
from torchdoctor.cli.state import console, emit
from torchdoctor.core.errors import UsageError


@app.command("report")
def report_command(
    source: Path = typer.Argument(
        ..., help="A run folder (from diagnose, tune, analyze, demo) or one record file."
    ),
    out: Path | None = typer.Option(
        None, "-o", "--out", help="Where to write (default: report.<format> in the run folder)."
    ),
    fmt: str = typer.Option("html", "--format", "-f", help="html, md or json."),
) -> None:
    """Render the report of a run: one self-contained HTML page (or Markdown, or JSON)."""
    from torchdoctor.core.rundir import display_path
    from torchdoctor.report import FORMATS, render_report

    if fmt not in FORMATS:
        raise UsageError(f"unknown report format {fmt!r}", hint="use html, md or json")
    path = render_report(source, fmt, out)
    shown = display_path(path)
    if shown.startswith(".."):  # outside the working folder: the absolute path reads better
        shown = str(path.resolve())
    emit(
        {"report": str(path), "format": fmt, "bytes": path.stat().st_size},
        lambda _: console.print(shown, highlight=False, soft_wrap=True, markup=False),
    )
