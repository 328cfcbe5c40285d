"""`torchdoctor workloads`: the built-in workloads, with what one sample is."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from torchdoctor.cli.main import app
from torchdoctor.cli.state import emit


@app.command("workloads")
def workloads_command() -> None:
    """List the built-in workloads (use one with `torchdoctor run NAME`)."""
    from torchdoctor.workloads import list_workloads

    rows = [
        {
            "name": w.name,
            "kind": w.kind,
            "description": w.description,
            "sample": w.sample_unit,
            "tokens_per_sample": w.tokens_per_sample,
            "default_batch_size": w.default_batch_size,
            "input_shapes": {k: list(v) for k, v in w.input_shapes.items()},
        }
        for w in list_workloads()
    ]

    def render(console: Console) -> None:
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
        console.print(table)

    emit({"schema": "torchdoctor/workloads", "version": 1, "workloads": rows}, render)
