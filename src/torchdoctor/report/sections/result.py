"""The result a tune's report leads with (tune.json, tune_config.json): one sentence, one small
table, why the headline and the ladder's last row differ, every note, the re-check command."""

from __future__ import annotations

from torchdoctor.report.adapters.reproduce import shown_path
from torchdoctor.report.adapters.result import result_section
from torchdoctor.report.load import RunRecords
from torchdoctor.report.markdown import ALT_FENCE, FENCE, kv_lines, md
from torchdoctor.report.model import ResultView
from torchdoctor.report.registry import Section, register_section


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


# `torchdoctor tune` and `demo` print the result themselves (report/terminal/tune.py).
RESULT = register_section(
    Section(
        name="result",
        reads=("tune", "tune_config"),
        adapter=result_view,
        order=3,
        markdown_order=3,
        markdown=result_markdown,
        html="sections/result.html.j2",
        terminal=None,
    )
)
