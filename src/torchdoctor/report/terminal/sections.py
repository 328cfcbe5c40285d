"""The report's sections on a terminal: each registered section that has a terminal form.

A stage whose section renders a `Blocks` view (report/blocks.py) prints its run folder with
`render_sections(console, run_dir)` and writes no rich table of its own. The built-in
sections have no terminal form: the command that writes their record prints that record
(report/terminal/<command>.py).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from rich.console import Console

from torchdoctor.report.adapters import build_view
from torchdoctor.report.load import read_input
from torchdoctor.report.model import ReportView
from torchdoctor.report.registry import sections


def render_view(console: Console, view: ReportView, only: Collection[str] | None = None) -> None:
    """Print the sections of `view` that have a terminal form and something to show."""
    for section in sections():
        if section.terminal is None or (only is not None and section.name not in only):
            continue
        part = view.section(section.name)
        if part is not None:
            section.terminal(console, part)


def render_sections(
    console: Console, source: str | Path, only: Collection[str] | None = None
) -> None:
    """Print the sections of a run folder (or one record file); `only`: these sections."""
    render_view(console, build_view(read_input(Path(source))), only)
