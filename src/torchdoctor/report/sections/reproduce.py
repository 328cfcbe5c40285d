"""How to reproduce: the command that made the run, and the best recipe as code."""

from __future__ import annotations

from torchdoctor.report.adapters.reproduce import reproduce
from torchdoctor.report.markdown import ALT_FENCE, FENCE
from torchdoctor.report.model import ReproduceSection
from torchdoctor.report.registry import Section, register_section


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


REPRODUCE = register_section(
    Section(
        name="reproduce",
        reads=("manifest", "tune"),
        adapter=reproduce,
        order=90,
        markdown_order=60,
        markdown=reproduce_markdown,
        html="sections/reproduce.html.j2",
        terminal=None,
    )
)
