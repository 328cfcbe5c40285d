"""The environment and its measured ceilings (env.json, else the diagnosis's own)."""

from __future__ import annotations

from torchdoctor.report.adapters.env import environment
from torchdoctor.report.markdown import kv_lines
from torchdoctor.report.model import EnvSection
from torchdoctor.report.registry import Section, register_section


def environment_markdown(view: EnvSection | None) -> list[str]:
    if not view:
        return []
    return ["## Environment and measured ceilings", "", *kv_lines(view.facts)]


# `torchdoctor env` prints the fingerprint and ceilings itself (report/terminal/env.py).
# On the page the environment comes last (evidence); in Markdown right after the verdict.
ENVIRONMENT = register_section(
    Section(
        name="environment",
        reads=("env", "diagnosis"),
        adapter=environment,
        order=80,
        markdown_order=35,
        markdown=environment_markdown,
        html="sections/environment.html.j2",
        terminal=None,
    )
)
