"""The environment and its measured ceilings (env.json, else the diagnosis's own)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.report.adapters.env import environment
from torchdoctor.report.markdown import kv_lines
from torchdoctor.report.registry import RunRecords, Section, register_section
from torchdoctor.report.views import EnvSection

if TYPE_CHECKING:
    from rich.console import Console

    from torchdoctor.report.terminal.env import Machine


def environment_markdown(view: EnvSection | None) -> list[str]:
    if not view:
        return []
    return ["## Environment and measured ceilings", "", *kv_lines(view.facts)]


def environment_terminal_view(found: RunRecords) -> Machine | None:
    from torchdoctor.report.terminal.env import machine_view

    return machine_view(found.env)


def environment_terminal(console: Console, view: Machine) -> None:
    from torchdoctor.report.terminal.env import render_env

    render_env(console, view)


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
        terminal=environment_terminal,
        terminal_view=environment_terminal_view,
    )
)
