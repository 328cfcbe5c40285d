"""The same content as Markdown, for pull requests and CI logs (tables, no charts).

The page's head (title, status, warnings, what is missing) is written here; each registered
section writes its own lines (`Section.markdown`), in `Section.markdown_order`: a tune's result
first (one sentence, one table), then its ladder, the diagnosis and its findings, the
environment, then the evidence, which is what a reader of a pull request wants.

Strings from users or traces are escaped so they cannot break a table or inject markup: pipes,
backticks, HTML angle brackets and the other Markdown control characters.
"""

from __future__ import annotations

from torchdoctor.report._mdtext import ALT_FENCE, FENCE, kv_lines, md, table_lines
from torchdoctor.report.registry import markdown_sections
from torchdoctor.report.views import ReportView

__all__ = ["ALT_FENCE", "FENCE", "kv_lines", "md", "render_markdown", "table_lines"]


def _head(v: ReportView) -> list[str]:
    h = v.header
    out = [f"# {md(h.title)}", "", f"Status: **{md(h.status)}**"]
    said = "Interrupted" if h.status == "interrupted" else "Error"
    out += [f"{said}: {md(h.error)}"] if h.error else []
    if h.resume:
        out += ["", "The run stopped before the end; continue it where it stopped:", ""]
        out += ["```sh", h.resume.replace(FENCE, ALT_FENCE), "```"]
    out.append("")
    out += [f"> **Warning:** {md(w)}" for w in v.warnings]
    out += [""] if v.warnings else []
    if v.missing:
        out += ["## What is missing", ""]
        out += [f"- {md(r.file)} ({md(r.section)}): {md(r.why)}." for r in v.missing]
        out.append("")
    return out


def render_markdown(view: ReportView) -> str:
    lines = _head(view)
    for section in markdown_sections():
        lines += section.markdown(view.section(section.name))
    return "\n".join(lines).rstrip() + "\n"
