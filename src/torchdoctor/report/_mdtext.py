"""Markdown text primitives: escaping a value, a table, labelled facts.

Kept apart from `markdown.py` (which walks the registered sections) so that a section's own
Markdown form can use them without importing the page that imports the registry.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from torchdoctor.core.text import printable
from torchdoctor.report.views import KeyValue

FENCE = "```"
ALT_FENCE = "'''"
#: Characters that start emphasis, code, links, tables or strikethrough anywhere in a line.
#: Block markers (#, -, +, 1.) only act at a line start, which an escaped value never is.
_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md(text: object) -> str:
    """Escape a string for a Markdown table cell or paragraph."""
    s = printable(str(text)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
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
