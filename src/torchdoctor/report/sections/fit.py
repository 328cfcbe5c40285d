"""The memory ladder of `tune --objective fit` (tune.json's `fit`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.report.adapters.fit import memory_ladder_view
from torchdoctor.report.registry import Section, register_section
from torchdoctor.report.sections.result import tune_terminal_view

if TYPE_CHECKING:
    from rich.console import Console

    from torchdoctor.tune import TuneResult


def memory_ladder_terminal(console: Console, result: TuneResult) -> None:
    from torchdoctor.report.terminal.tune import render_fit

    render_fit(console, result)


# Right after the tuning ladder, whose rungs it explains in memory; on a terminal the result
# prints it within its own lines, after the Pareto front (report/terminal/tune.py).
MEMORY_LADDER = register_section(
    Section(
        name="memory_ladder",
        reads=("tune",),
        adapter=memory_ladder_view,
        order=8,
        markdown_order=7,
        terminal=memory_ladder_terminal,
        terminal_view=tune_terminal_view,
        within="result",
    )
)
