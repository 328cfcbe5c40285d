"""The same content as Markdown, for pull requests and CI logs (tables, no charts).

The page's head (title, status, warnings, what is missing) is written here; each registered
section writes its own lines (`Section.markdown`), in `Section.markdown_order`: verdict and
cure first, then the evidence, which is what a reader of a pull request wants.

Strings from users or traces are escaped so they cannot break a table or inject markup: pipes,
backticks, HTML angle brackets and the other Markdown control characters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from torchdoctor.report.model import KeyValue, ReportView
from torchdoctor.report.registry import markdown_sections

FENCE = "```"
ALT_FENCE = "'''"
#: Characters that start emphasis, code, links, tables or strikethrough anywhere in a line.
#: Block markers (#, -, +, 1.) only act at a line start, which an escaped value never is.
_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md(text: object) -> str:
    """Escape a string for a Markdown table cell or paragraph."""
    s = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = s.replace("\r", " ").replace("\n", " ")
    return _SPECIAL.sub(r"\\\1", s)


def table_lines(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A table (every cell escaped), then a blank line."""
    lines = ["| " + " | ".join(md(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def kv_lines(rows: Sequence[KeyValue]) -> list[str]:
    """Labelled facts as a two-column table (nothing when there are none)."""
    return table_lines(["", ""], [(r.label, r.value) for r in rows]) if rows else []


def _head(v: ReportView) -> list[str]:
    h = v.header
    out = [f"# {md(h.title)}", "", f"Status: **{md(h.status)}**"]
    out += [f"Error: {md(h.error)}"] if h.error else []
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
