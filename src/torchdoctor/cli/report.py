"""`torchdoctor report RUN_DIR_OR_RECORD`: render a run folder's records as HTML, MD or JSON."""

from __future__ import annotations

from pathlib import Path

import typer

from torchdoctor.cli.main import app
from torchdoctor.cli.state import console, emit
from torchdoctor.core.defaults import REPORT_FORMAT


@app.command("report")
def report_command(
    source: Path = typer.Argument(
        ..., help="A run folder (from diagnose, tune, analyze, demo) or one record file."
    ),
    out: Path | None = typer.Option(
        None, "-o", "--out", help="Where to write (default: report.<format> in the run folder)."
    ),
    fmt: str = typer.Option(REPORT_FORMAT, "--format", "-f", help="html, md or json."),
    tensorboard: Path | None = typer.Option(
        None,
        "--tensorboard",
        help="Also write the run's figures as TensorBoard scalars under this folder "
        "(`tensorboard --logdir` it; needs the \\[tensorboard] extra).",
    ),
) -> None:
    """Render the report of a run: one self-contained HTML page (or Markdown, or JSON).

    With --tensorboard LOG_DIR, the run's throughput, step times, phase shares, findings'
    bounds and the tuning ladder also go to TensorBoard event files there.
    """
    from torchdoctor.api import report
    from torchdoctor.core.rundir import display_path

    path = report(source, fmt=fmt, out=out)
    if tensorboard is not None:
        from torchdoctor.integrations import write_scalars

        written = write_scalars(source, tensorboard)
        err = "" if written else " (none: the run holds no figures for it)"
        from torchdoctor.cli.state import err_console

        err_console.print(f"TensorBoard: {written} scalars in {display_path(tensorboard)}{err}")
    shown = display_path(path)
    if shown.startswith(".."):  # outside the working folder: the absolute path reads better
        shown = str(path.resolve())
    emit(
        {"report": str(path), "format": fmt, "bytes": path.stat().st_size},
        lambda _: console.print(shown, highlight=False, soft_wrap=True, markup=False),
    )
