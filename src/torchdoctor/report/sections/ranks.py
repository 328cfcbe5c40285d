"""Across ranks (cross_rank.json, or a folder analysis's `cross_rank`): a distributed job's
ranks side by side, the skew at its collectives and its stragglers."""

from __future__ import annotations

from typing import Final

from torchdoctor.core import rundir
from torchdoctor.report.adapters.ranks import cross_rank_of, ranks_blocks
from torchdoctor.report.blocks import Blocks
from torchdoctor.report.load import RunRecords
from torchdoctor.report.registry import RecordType, Section, register_record, register_section

CROSS_RANK: Final = register_record(
    RecordType(
        key="cross_rank",
        file=rundir.CROSS_RANK,
        module="torchdoctor.analyze",
        cls="CrossRankAnalysis",
        schema="cross_rank",
        feeds="the per-rank table and stragglers",
    )
)


def ranks_view(found: RunRecords) -> Blocks | None:
    return ranks_blocks(cross_rank_of(found.records))


# Right after the verdict: who holds the job back is what to read before the findings. On a
# terminal the ranks are printed with the steps (report/terminal/steps.py): after a trace
# folder's analysis, or alone for a job's diagnosis.
RANKS: Final = register_section(
    Section(
        name="ranks",
        reads=("cross_rank", "analysis"),
        adapter=ranks_view,
        order=15,
        markdown_order=25,
        within="steps",
    )
)
