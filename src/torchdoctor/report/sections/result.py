"""The result a tune's report leads with (tune.json, tune_config.json): one sentence, one small
table, why the headline and the ladder's last row differ, every note, the re-check command."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.report.adapters.reproduce import shown_path
from torchdoctor.report.adapters.result import result_section
from torchdoctor.report.load import RunRecords
from torchdoctor.report.markdown import ALT_FENCE, FENCE, kv_lines, md
from torchdoctor.report.registry import Section, register_section
from torchdoctor.report.views import ResultView

if TYPE_CHECKING:
    from rich.console import Console

    from torchdoctor.tune import TuneResult


def result_view(found: RunRecords) -> ResultView | None:
    tune = found.records.get("tune")
    if not tune:
        return None
    run = shown_path(found.source) if found.is_run_dir else "RUN"
    return result_section(tune, found.records.get("tune_config"), run)


def result_markdown(view: ResultView | None) -> list[str]:
    if not view:
        return []
    out = ["## Result", "", md(view.sentence), "", *kv_lines(view.rows)]
    for paragraph in (view.speedups, view.legend):
        out += [md(paragraph), ""] if paragraph else []
    out += [f"- Note: {md(n)}" for n in view.notes]
    out += [""] if view.notes else []
    if view.recheck:
        commands = [c.replace(FENCE, ALT_FENCE) for c in view.recheck]
        out += ["Re-check the claim (fresh process pairs):", "", "```sh", *commands, "```", ""]
    return out


def tune_terminal_view(found: RunRecords) -> TuneResult | None:
    """The terminal view of the tune's sections: tune.json as its record."""
    from torchdoctor.report.terminal.tune import tune_result_view

    return tune_result_view(found.records.get("tune"))


def result_terminal(console: Console, result: TuneResult) -> None:
    """The result, with the ladder, the Pareto front and the memory ladder printed within."""
    from torchdoctor.report.terminal.tune import render_result

    render_result(result, console)


RESULT = register_section(
    Section(
        name="result",
        reads=("tune", "tune_config"),
        adapter=result_view,
        order=3,
        markdown_order=3,
        markdown=result_markdown,
        html="sections/result.html.j2",
        terminal=result_terminal,
        terminal_view=tune_terminal_view,
    )
)
