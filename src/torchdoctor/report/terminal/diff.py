"""`torchdoctor diff` on a terminal: the diff section's own view, printed as the report does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.report.adapters.diff import diff_view_of
from torchdoctor.report.blocks import blocks_terminal

if TYPE_CHECKING:
    from rich.console import Console

    from torchdoctor.core.records import Record


def render_diff(result: Record, console: Console) -> None:
    """Print a `RunDiff` (what changed, the tables of changes, the findings)."""
    blocks_terminal(console, diff_view_of(result.to_json_dict()))
