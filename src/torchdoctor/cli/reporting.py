"""Writing a run folder's reports at the end of a command, and telling the user where.

Stages never call the report stage (it sits to their right in the pipeline); the commands
that produce a run folder call this once their records are written.
"""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape

from torchdoctor.cli.state import console, err_console, settings
from torchdoctor.core.errors import TorchDoctorError
from torchdoctor.core.log import get_logger
from torchdoctor.core.rundir import display_path

log = get_logger(__name__)


def write_run_reports(run_dir: Path) -> Path | None:
    """Write report.html and report.md into `run_dir`; print and return the HTML path.

    A report that cannot be rendered does not fail the run, whose records are already
    written: it is a warning, and `torchdoctor report RUN_DIR` can be retried.
    """
    from torchdoctor.report import write_reports

    try:
        paths = write_reports(run_dir)
    except TorchDoctorError as exc:
        log.warning("report not written: %s", exc)
        return None
    html = paths[0]
    # With --json, stdout carries only the record: the path goes to stderr.
    out = err_console if settings.json else console
    # soft_wrap: a path is copied and pasted, so it must never be broken across lines.
    out.print(f"Report: [bold]{escape(display_path(html))}[/]", soft_wrap=True)
    return html
