"""The built-in workloads as a rich table (terminal output of `torchdoctor workloads`)."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def workloads_table(rows: list[dict[str, Any]]) -> Table:
    """One row per workload, from the rows `torchdoctor workloads --json` prints."""
    table = Table(title="Built-in workloads (or your own: path/to/file.py:factory)")
    for column in ("name", "kind", "batch", "one sample", "description"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            str(row["name"]),
            str(row["kind"]),
            str(row["default_batch_size"]),
            str(row["sample"]),
            str(row["description"]),
        )
    return table
