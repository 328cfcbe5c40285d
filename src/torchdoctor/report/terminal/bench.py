"""Rich tables for measurements and comparisons (terminal output of `torchdoctor bench`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from torchdoctor.measure import Comparison, Measurement, RatioEstimate

_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))


def format_seconds(seconds: float) -> str:
    """3 significant digits in the largest unit that keeps the number at least 1."""
    for scale, unit in _UNITS:
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _verdict_text(est: RatioEstimate) -> str:
    colour = {"faster": "green", "slower": "red"}.get(est.verdict, "yellow")
    return f"[{colour}]{est.verdict.replace('_', ' ')}[/]"


def measurement_table(m: Measurement, *, title: str | None = None) -> Table:
    table = Table(title=title or m.label, show_header=True, header_style="bold")
    for column in ("median", f"{m.confidence:.0%} CI", "IQR", "p5", "p95", "p99", "samples"):
        table.add_column(column, justify="right")
    table.add_row(
        format_seconds(m.median),
        f"{format_seconds(m.ci_low)} .. {format_seconds(m.ci_high)}",
        format_seconds(m.iqr),
        format_seconds(m.p5),
        format_seconds(m.p95),
        format_seconds(m.p99),
        f"{m.n} x {m.number_per_block}",
    )
    return table


def comparison_table(c: Comparison) -> Table:
    table = Table(
        title=f"{c.rounds} interleaved rounds, baseline {c.baseline!r}",
        show_header=True,
        header_style="bold",
    )
    table.add_column("candidate")
    for column in ("median", "IQR", "samples", "speedup", f"{c.confidence:.0%} CI"):
        table.add_column(column, justify="right")
    table.add_column("verdict")
    for name, m in c.measurements.items():
        est = c.estimates.get(name)
        table.add_row(
            name + (" (baseline)" if name == c.baseline else ""),
            format_seconds(m.median),
            format_seconds(m.iqr),
            f"{m.n} x {m.number_per_block}",
            f"{est.speedup:.3f}x" if est else "1",
            f"{est.ci_low:.3f} .. {est.ci_high:.3f}" if est else "",
            _verdict_text(est) if est else "",
        )
    return table


def _print_warnings(console: Console, warnings: list[str]) -> None:
    for warning in warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)


def render_measurement(console: Console, m: Measurement) -> None:
    console.print(measurement_table(m))
    _print_warnings(console, m.warnings)


def render_comparison(console: Console, c: Comparison) -> None:
    console.print(comparison_table(c))
    _print_warnings(console, c.warnings)
    for name, m in c.measurements.items():
        _print_warnings(console, [f"{name}: {w}" for w in m.warnings])
