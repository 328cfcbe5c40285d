"""How to reproduce: the command that made the run, and the best recipe as code."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.report.adapters.reproduce import reproduce
from torchdoctor.report.markdown import ALT_FENCE, FENCE
from torchdoctor.report.registry import RunRecords, Section, register_section
from torchdoctor.report.views import ReproduceSection

if TYPE_CHECKING:
    from rich.console import Console


def reproduce_markdown(view: ReproduceSection | None) -> list[str]:
    if not view:
        return []
    commands = [c.replace(FENCE, ALT_FENCE) for c in view.commands]
    out = ["## How to reproduce", "", "```sh", *commands, "```", ""]
    if view.recipe_code:
        # Inside a fenced block nothing is markup; only a fence could end it early.
        code = view.recipe_code.replace(FENCE, ALT_FENCE)
        out += ["```python", code.rstrip("\n"), "```", ""]
    return out


def reproduce_terminal_view(found: RunRecords) -> ReproduceSection | None:
    """What made a run folder (its manifest's command): a command's own records, printed as
    it makes them, have no run to reproduce yet."""
    return reproduce(found) if found.manifest is not None else None


def reproduce_terminal(console: Console, view: ReproduceSection) -> None:
    """The commands, then the best recipe as code, as they are (no markup read in them)."""
    console.print("[bold]How to reproduce[/]")
    for command in view.commands:
        console.print(f"  {command}", highlight=False, markup=False, soft_wrap=True)
    if view.recipe_code:
        console.print(view.recipe_code.rstrip("\n"), highlight=False, markup=False)


REPRODUCE = register_section(
    Section(
        name="reproduce",
        reads=("manifest", "tune"),
        adapter=reproduce,
        order=90,
        markdown_order=60,
        markdown=reproduce_markdown,
        html="sections/reproduce.html.j2",
        terminal=reproduce_terminal,
        terminal_view=reproduce_terminal_view,
    )
)
