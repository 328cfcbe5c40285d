"""A generic section view (facts, tables, notes) and its terminal and Markdown forms.

A new stage's section returns a `Blocks` from its adapter and renders in every form with no
renderer of its own: the terminal prints rich tables, the Markdown pipes tables, the HTML page
includes templates/sections/blocks.html.j2. Every cell is already a display string (formatted
with report/format.py by the adapter), so the three forms show the same text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchdoctor.report._mdtext import kv_lines, md, table_lines
from torchdoctor.report.views import KeyValue

if TYPE_CHECKING:
    from rich.console import Console


@dataclass(frozen=True)
class Table:
    """Rows of display strings under a header; `title` is shown above it."""

    header: list[str]
    rows: list[list[str]]
    title: str | None = None


@dataclass(frozen=True)
class Blocks:
    """A section of labelled facts, then tables, then notes, under one heading."""

    title: str
    facts: list[KeyValue] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def blocks_markdown(view: Blocks | None) -> list[str]:
    """The Markdown form: a level-2 heading, the facts, each table, the notes."""
    if view is None:
        return []
    out = [f"## {md(view.title)}", "", *kv_lines(view.facts)]
    for table in view.tables:
        out += [f"### {md(table.title)}", ""] if table.title else []
        out += table_lines(table.header, table.rows)
    for note in view.notes:
        out += [md(note), ""]
    return out


def blocks_terminal(console: Console, view: Blocks | None) -> None:
    """The terminal form: the facts as a two-column table, each table, the notes."""
    from rich.markup import escape
    from rich.table import Table as RichTable

    if view is None:
        return
    if view.facts:
        facts = RichTable(title=escape(view.title), show_header=False)
        facts.add_column("what")
        facts.add_column("value")
        for row in view.facts:
            facts.add_row(escape(row.label), escape(row.value))
        console.print(facts)
    else:
        console.print(f"[bold]{escape(view.title)}[/]")
    for table in view.tables:
        shown = RichTable(title=escape(table.title) if table.title else None)
        for column in table.header:
            shown.add_column(escape(column))
        for cells in table.rows:
            shown.add_row(*(escape(c) for c in cells))
        console.print(shown)
    for note in view.notes:
        console.print(f"note: {escape(note)}", highlight=False)
