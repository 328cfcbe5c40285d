"""`torchdoctor scale`'s terminal output: the study's section, as the report shows it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchdoctor.report.adapters.scale import scaling_blocks
from torchdoctor.report.blocks import blocks_terminal

if TYPE_CHECKING:
    from rich.console import Console


def render_scaling(study: Any, console: Console) -> None:
    """Print a `ScalingStudy` (a record, or its JSON form)."""
    data = study.to_json_dict() if hasattr(study, "to_json_dict") else study
    blocks_terminal(console, scaling_blocks(data))
