"""`torchdoctor workloads`: the built-in workloads, with what one sample is."""

from __future__ import annotations

from rich.console import Console

from torchdoctor.cli.main import app
from torchdoctor.cli.state import emit


@app.command("workloads")
def workloads_command() -> None:
    """List the built-in workloads (use one with `torchdoctor run NAME`)."""
    from torchdoctor.api import workloads

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
        for w in workloads()
    ]

    def render(console: Console) -> None:
        from torchdoctor.report import workloads_table

        console.print(workloads_table(rows))

    emit({"schema": "torchdoctor/workloads", "version": 1, "workloads": rows}, render)
