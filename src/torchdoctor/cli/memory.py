"""`torchdoctor memory WORKLOAD`: who holds a step's memory, and the largest batch that fits.

Runs one steady training step at each of two or three small batch sizes, splits each step's
memory into its owners (parameters, gradients, optimizer state, activations saved for
backward, temporaries, allocator slack), fits memory(batch) = fixed + per_sample * batch, and,
given `--max-memory`, predicts the largest batch under it and whether activation
checkpointing pays. Writes a run folder with memory.json (`MemoryPlan`) and the reports.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from torchdoctor.cli.main import app
from torchdoctor.cli.options import (
    default_device,
    device_option,
    parse_workload_params,
    seed_option,
)
from torchdoctor.cli.reporting import write_run_reports
from torchdoctor.cli.state import emit
from torchdoctor.cli.tune import parse_size
from torchdoctor.core.errors import UsageError


def parse_batch_sizes(text: str) -> list[int]:
    """'8,16,32' -> [8, 16, 32]: two or three distinct positive batch sizes."""
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        sizes = []
    if len(sizes) < 2 or sizes[0] < 1:
        raise UsageError(
            f"cannot read batch sizes {text!r}",
            hint="give two or three distinct positive batch sizes, e.g. --batch-sizes 8,16,32",
        )
    return sizes


@app.command("memory")
def memory_command(
    workload: str = typer.Argument(..., help="Built-in name (see `workloads`) or file.py:factory."),
    max_memory: str = typer.Option(
        None,
        "--max-memory",
        help="Memory budget, e.g. 4GiB or 512MiB: predict the largest batch whose step fits.",
    ),
    batch_sizes: str = typer.Option(
        None,
        "--batch-sizes",
        help="Two or three small batch sizes to measure, e.g. 8,16,32 "
        "(default: a quarter, a half and all of the workload's default batch).",
    ),
    settings: list[str] = typer.Option(
        [], "--set", help="Knob setting knob=value (repeatable), e.g. --set precision=bf16."
    ),
    params: list[str] = typer.Option([], "--param", help="Workload parameter name=value."),
    out: Path | None = typer.Option(None, "--out", help="Run folder (default: a new one)."),
    seed: int = seed_option(),
    device: str | None = device_option(),
) -> None:
    """Split a step's memory into its owners and predict the largest batch that fits.

    Each batch size runs one warm-up step and one measured step. On a GPU the peak is the
    CUDA caching allocator's (allocated, and reserved: the difference is its slack); on the
    CPU it is counted from the live tensors. The footprint is fitted against the batch size
    as fixed + per_sample * batch; with --max-memory the largest batch under the budget is
    predicted, and activation checkpointing is said to pay when activations are at least half
    of the per-sample slope.

    Example: torchdoctor memory gpt --max-memory 2GiB --batch-sizes 4,8,16
    """
    from torchdoctor.analyze import study_memory
    from torchdoctor.core.rundir import MEMORY, finish_run_dir, new_run_dir
    from torchdoctor.knobs import Recipe
    from torchdoctor.report import render_memory
    from torchdoctor.workloads import get_workload

    if any(item.partition("=")[0].strip() == "batch_size" for item in settings):
        raise UsageError(
            "memory sets the batch size itself", hint="give the sizes as --batch-sizes 8,16,32"
        )
    budget = parse_size(max_memory) if max_memory is not None else None
    sizes = parse_batch_sizes(batch_sizes) if batch_sizes is not None else None
    device = default_device(device)
    job = get_workload(workload, **parse_workload_params(params))
    recipe = Recipe.parse(settings, workload=job, device=device)
    if out is not None and out.exists() and any(out.iterdir()):
        raise UsageError(f"--out {out} exists and is not empty", hint="pass a new folder")
    run_dir = new_run_dir("memory", job.name, out=out)
    try:
        plan = study_memory(
            job, batch_sizes=sizes, budget_bytes=budget, device=device, recipe=recipe, seed=seed
        )
        plan.write(run_dir / MEMORY)
    except BaseException as exc:
        finish_run_dir(run_dir, error=str(exc).splitlines()[0] if str(exc) else repr(exc))
        raise
    finish_run_dir(run_dir)

    def render(console: Console) -> None:
        render_memory(console, plan)

    emit(plan, render)
    write_run_reports(run_dir)
