"""The serving curve: request latency against throughput as the batch grows, knee and SLA."""

from __future__ import annotations

from typing import Any

from torchdoctor.report.adapters.serve import ServeView
from torchdoctor.report.charts._svg import PALETTE, WIDTH_IN, to_svg


def serve_chart(plt: Any, view: ServeView | None) -> str | None:
    """p50 and p99 (ms) against throughput along the batch-size curve; the knee circled; the
    SLA's bound a horizontal line and its point, when there is one, a star."""
    curve = next((c for c in view.curves if c.axis == "batch_size"), None) if view else None
    if view is None or curve is None or not curve.x:
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.2))
    ms50 = [v * 1e3 for v in curve.p50_s]
    ms99 = [v * 1e3 for v in curve.p99_s]
    ax.plot(curve.samples_per_s, ms50, "o-", color=PALETTE[0], label="p50")
    ax.plot(curve.samples_per_s, ms99, "s--", color=PALETTE[1], label="p99")
    for x, y, b in zip(curve.samples_per_s, ms50, curve.x, strict=True):
        ax.annotate(f"b={b:g}", (x, y), xytext=(4, -10), textcoords="offset points", fontsize=7)
    if curve.knee is not None:
        ax.plot(
            [curve.samples_per_s[curve.knee]],
            [ms50[curve.knee]],
            "o",
            markersize=12,
            markerfacecolor="none",
            markeredgecolor=PALETTE[5],
            label="knee",
        )
    if view.sla_bound_s is not None:
        ax.axhline(
            view.sla_bound_s * 1e3,
            color=PALETTE[5],
            linewidth=0.8,
            label=f"SLA p{view.sla_percentile or 0:g} bound",
        )
        if view.sla_rate is not None:
            ax.plot(
                [view.sla_rate],
                [view.sla_bound_s * 1e3],
                "*",
                markersize=12,
                color=PALETTE[2],
                label="SLA point",
            )
    ax.set_xlabel("throughput (requests/s)")
    ax.set_ylabel("request latency (ms)")
    ax.legend(fontsize=8)
    return to_svg(fig, "serve")


__all__ = ["serve_chart"]
