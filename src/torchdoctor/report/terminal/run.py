"""Rich rendering of a `RunResult` (terminal output of `torchdoctor run`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from torchdoctor.core.steps import PHASES
from torchdoctor.engine import RunResult


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


def _loss(value: float | None) -> str:
    # None stands for a NaN or infinite loss (see RunResult.losses).
    return "non-finite" if value is None else f"{value:.4f}"


def render_run(console: Console, result: RunResult) -> None:
    recipe = " ".join(f"{k}={v}" for k, v in result.recipe.items()) or "baseline (all defaults)"
    m = result.step_time
    summary = Table(title=f"{result.workload} on {result.device}: {recipe}", show_header=False)
    summary.add_column("what")
    summary.add_column("value", justify="right")
    summary.add_row("samples/s (steady state)", f"{result.samples_per_s:,.1f}")
    if result.tokens_per_s is not None:
        summary.add_row("tokens/s (steady state)", f"{result.tokens_per_s:,.0f}")
    summary.add_row(
        "step time median [CI]",
        f"{m.median * 1e3:.2f} ms [{m.ci_low * 1e3:.2f}, {m.ci_high * 1e3:.2f}]",
    )
    summary.add_row("step time p95", f"{m.p95 * 1e3:.2f} ms")
    summary.add_row("samples per step", f"{result.samples_per_step}")
    summary.add_row("first step", f"{(result.first_step_s or 0):.2f} s")
    summary.add_row(
        "compile / warm-up overhead", f"{result.compile_s:.2f} s over {result.warmup_steps} steps"
    )
    summary.add_row("peak RSS", _mib(result.memory.cpu_peak_rss_bytes))
    if result.memory.cuda_max_allocated_bytes is not None:
        summary.add_row("CUDA max allocated", _mib(result.memory.cuda_max_allocated_bytes))
    if result.memory.cuda_graph_pools and result.memory.cuda_peak_bytes is not None:
        summary.add_row("CUDA peak (graph pools)", _mib(result.memory.cuda_peak_bytes))
    if result.losses:
        summary.add_row(
            "loss first -> last", f"{_loss(result.losses[0])} -> {_loss(result.losses[-1])}"
        )
    if result.diverged:
        summary.add_row(
            "[red]loss diverged[/]", f"first non-finite at step {result.nonfinite_loss_step}"
        )
    console.print(summary)
    for warning in m.warnings:
        console.print(f"[yellow]note:[/] {warning}")
    if result.machine_load is not None and result.machine_load.warning:
        console.print(f"[yellow]warning:[/] {result.machine_load.warning}", highlight=False)

    if result.phase_fractions is None:
        return
    # The phase split comes from the steps timed with per-phase syncs, apart from the
    # throughput steps (`RunResult.phase_steps`; older records hold phases in `steps`).
    timed = result.phase_steps or result.steps
    steps = len(timed)
    phases = Table(title=f"Where each step's time goes (steady state, {steps} synchronized steps)")
    phases.add_column("phase")
    phases.add_column("ms / step", justify="right")
    phases.add_column("share", justify="right")
    for phase in PHASES:
        seconds = sum(s.phases.get(phase, 0.0) for s in timed) / steps
        # A record of a run folder may lack a phase its run never timed (no copy to a device).
        share = result.phase_fractions.get(phase, 0.0)
        phases.add_row(phase, f"{seconds * 1e3:.2f}", f"{share:6.1%}")
    console.print(phases)
