"""Rich rendering of `torchdoctor run --recipe R --vs-baseline -- python train.py`: a recipe
against the script as it is, in fresh process pairs (a `Confirmation`)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from torchdoctor.report.format import rate, value_text
from torchdoctor.tune import Confirmation


def recheck_verdict(check: Confirmation) -> str:
    """What the interval says: faster, slower, or no difference shown."""
    if check.speedup_ci is None:
        return "no interval"
    low, high = check.speedup_ci
    if low > 1.0:
        return "faster"
    if high < 1.0:
        return "slower"
    return "no difference shown: the interval holds 1.00x"


def render_recheck(console: Console, check: Confirmation, target: str) -> None:
    recipe = " ".join(f"{k}={value_text(v)}" for k, v in check.recipe.items()) or "no knobs"
    pairs = len(check.rates)
    table = Table(
        title=escape(f"{target}: {recipe} vs as it is"),
        caption=f"{pairs} fresh process pairs, {check.steps or '-'} steady steps each process, "
        "timed in alternating chunks; the interval is over the pairs",
    )
    table.add_column("")
    table.add_column("samples/s (median)", justify="right")
    table.add_column("each process", justify="right")
    table.add_row(
        "as it is",
        rate(check.baseline_samples_per_s),
        " ".join(f"{r:,.1f}" for r in check.baseline_rates),
    )
    table.add_row(
        "with the recipe", rate(check.samples_per_s), " ".join(f"{r:,.1f}" for r in check.rates)
    )
    console.print(table)
    if check.speedup is None or check.speedup_ci is None:
        console.print(f"[yellow]no ratio: {escape(check.reason or check.status)}[/]")
        return
    low, high = check.speedup_ci
    console.print(
        f"speedup [bold]{check.speedup:.2f}x[/] [{low:.2f}, {high:.2f}]: {recheck_verdict(check)}",
        highlight=False,
    )
