"""Rich rendering of a profiled window (terminal output of `torchdoctor profile`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from torchdoctor.core.rundir import display_path

#: Modules listed in the FLOP table (heaviest first); the JSON keeps all of them.
TOP_MODULES = 12


def render_profile(console: Console, run_dir: Path, capture: Any, analysis: Any) -> None:
    """A profiled window: step time, FLOPs per module, step breakdown, the run folder."""
    steps = capture.step_times_s
    mean_ms = 1000 * sum(steps) / len(steps) if steps else 0.0
    console.print(
        f"[bold]{capture.workload}[/] on {capture.device}: profiled {capture.active} step(s) "
        f"after {capture.wait} skipped + {capture.warmup} warm-up, {mean_ms:.2f} ms/step, "
        f"{capture.flops_per_step / 1e9:.3f} GFLOP/step"
    )
    table = Table(title="FLOPs per module (one training step)")
    table.add_column("module")
    table.add_column("GFLOP", justify="right")
    table.add_column("share", justify="right")
    total = capture.flops_per_step or 1
    for m in capture.flops_by_module[:TOP_MODULES]:
        table.add_row(m.module, f"{m.flops / 1e9:.4f}", f"{100 * m.flops / total:.1f}%")
    console.print(table)
    if analysis.step_breakdown:
        shares = ", ".join(f"{k} {v:.1f}%" for k, v in analysis.step_breakdown.items() if v >= 0.05)
        console.print(f"step breakdown ({analysis.steps.basis}): {shares}")
    console.print(f"run folder: {display_path(run_dir)}")
