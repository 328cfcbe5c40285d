"""How a record shows in a notebook (`_repr_html_`): a heading, a few labelled facts, tables.

Jupyter calls `_repr_html_` on the value of a cell's last expression. Every `Record` has one
(its scalar fields as a table); the main results (`Diagnosis`, `TuneResult`, `RunDiff`) show
what their command prints. Like the report, this formats what a record holds and computes
nothing; every string is escaped.
"""

from __future__ import annotations

import html
import sys
from collections.abc import Sequence
from typing import Any

#: Longest text shown in one cell; a record's long fields (a traceback, a command) are cut.
MAX_CELL_CHARS = 200


def cell(value: Any) -> str:
    """One value as escaped cell text: floats to 4 significant digits, lists by their length."""
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, list | tuple) and not all(isinstance(v, int | float) for v in value):
        text = f"{len(value)} items"
    elif isinstance(value, dict):
        text = ", ".join(f"{k}={cell(v)}" for k, v in list(value.items())[:8])
    else:
        text = str(value)
    if len(text) > MAX_CELL_CHARS:
        text = text[: MAX_CELL_CHARS - 1] + "…"
    return html.escape(text)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def facts(title: str, pairs: Sequence[tuple[str, Any]], *tables: str) -> str:
    """A heading, a two-column table of labelled facts, then any further tables."""
    rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{cell(v)}</td></tr>"
        for k, v in pairs
    )
    return f"<div><strong>{html.escape(title)}</strong><table>{rows}</table>{''.join(tables)}</div>"


def record_facts(record: Any) -> str:
    """The generic form: the record's fields that are not nested records."""
    pairs = [
        (name, value)
        for name, value in record
        if value is not None and not hasattr(value, "model_fields")
    ]
    return facts(type(record).__name__, pairs)


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (a notebook's cell output can draw a progress
    bar), as IPython says: its running shell is a kernel's (`ZMQInteractiveShell`, or any
    shell started by `IPKernelApp`). A terminal IPython or plain Python is not.

    IPython is looked up only if already imported: a kernel imports it before any cell runs,
    so a script never pays for the import.
    """
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    shell = get_ipython() if callable(get_ipython) else None
    if shell is None:
        return False
    config = getattr(shell, "config", None) or {}
    return type(shell).__name__ == "ZMQInteractiveShell" or "IPKernelApp" in config
