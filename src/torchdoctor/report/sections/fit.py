"""The memory ladder of `tune --objective fit` (tune.json's `fit`)."""

from __future__ import annotations

from torchdoctor.report.adapters.fit import memory_ladder_view
from torchdoctor.report.registry import Section, register_section

# Right after the tuning ladder, whose rungs it explains in memory.
MEMORY_LADDER = register_section(
    Section(
        name="memory_ladder",
        reads=("tune",),
        adapter=memory_ladder_view,
        order=8,
        markdown_order=7,
    )
)
