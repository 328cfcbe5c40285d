"""Host time by Python line: the top lines of the steady steps (profile.json's or
run_result.json's host_lines)."""

from __future__ import annotations

from torchdoctor.report.adapters.host_lines import host_lines_view
from torchdoctor.report.registry import Section, register_section

# After the step breakdown (where the `other` share is shown), before the roofline.
HOST_LINES = register_section(
    Section(
        name="host_lines",
        reads=("profile", "run_result"),
        adapter=host_lines_view,
        order=65,
        markdown_order=75,
    )
)
