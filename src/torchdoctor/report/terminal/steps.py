"""The step breakdown section on a terminal: the steps of the record a run folder holds, in the
shape its command prints them: a trace analysis as `torchdoctor analyze` does (with the
roofline's top ops and the ranks within it), else a run as `torchdoctor run` does (its summary
and its phase table); then a job's ranks side by side, where no analysis holds them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchdoctor.report.adapters.ranks import ranks_blocks
from torchdoctor.report.blocks import Blocks, blocks_terminal
from torchdoctor.report.registry import RunRecords

if TYPE_CHECKING:
    from rich.console import Console

    from torchdoctor.analyze import TraceAnalysis
    from torchdoctor.engine import RunResult


@dataclass(frozen=True)
class StepRecords:
    """The step section's terminal view: a trace analysis, else a run."""

    analysis: TraceAnalysis | None = None
    run: RunResult | None = None
    ranks: Blocks | None = None
    """cross_rank.json's ranks, where the analysis does not print them within its own."""


def analysis_view(found: RunRecords) -> TraceAnalysis | None:
    """analysis.json as its record (None: no trace analysis)."""
    data = found.records.get("analysis")
    if not data:
        return None
    from torchdoctor.analyze import TraceAnalysis

    return TraceAnalysis.from_json_dict(data)


def steps_view(found: RunRecords) -> StepRecords | None:
    """The record whose steps a terminal shows: a trace analysis, else a run; and the ranks."""
    analysis = analysis_view(found)
    held = analysis is not None and analysis.cross_rank is not None
    ranks = None if held else ranks_blocks(found.records.get("cross_rank"))
    run = found.records.get("run_result")
    if analysis is None and run:
        from torchdoctor.engine import RunResult

        return StepRecords(run=RunResult.from_json_dict(run), ranks=ranks)
    if analysis is None and ranks is None:
        return None
    return StepRecords(analysis=analysis, ranks=ranks)


def render_steps(console: Console, view: StepRecords) -> None:
    """The step section's terminal form."""
    if view.analysis is not None:
        from torchdoctor.report.terminal.analysis import render_analysis

        render_analysis(view.analysis, console)
    elif view.run is not None:
        from torchdoctor.report.terminal.run import render_run

        render_run(console, view.run)
    blocks_terminal(console, view.ranks)
