"""The roofline: ops as points (arithmetic intensity vs achieved FLOP/s) under the measured
compute roofs and the measured memory-bandwidth slope, log-log, sized by time.

The roof lines are the ceilings themselves: FLOP/s = min(peak, bandwidth * intensity)
(Williams, Waterman, Patterson, "Roofline", CACM 2009). Drawing them is layout; the points
and the ceilings are the records' numbers.
"""

from __future__ import annotations

from typing import Any, Final

from torchdoctor.report.charts._svg import PALETTE, WIDTH_IN, chart_text, to_svg
from torchdoctor.report.views import RooflineSection

#: Ops labelled on the chart by name (the most expensive ones); the table lists all.
LABELLED_OPS: Final = 5
#: Marker areas (pt^2) for the smallest and the most expensive op.
MIN_AREA: Final = 12.0
MAX_AREA: Final = 400.0
_BOUND_COLOURS: Final = {"compute": PALETTE[0], "memory": PALETTE[5], "overhead": PALETTE[7]}


def _bound_key(bound: str | None) -> str:
    text = (bound or "").lower()
    return next((k for k in _BOUND_COLOURS if k in text), "overhead")


def roofline_chart(plt: Any, section: RooflineSection) -> str | None:
    ops = [
        o
        for o in section.ops
        if o.intensity and o.achieved_flops_per_s and o.intensity > 0 and o.achieved_flops_per_s > 0
    ]
    if not ops:
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 4.2))
    biggest = max((o.time_us or 0.0) for o in ops) or 1.0
    xs = [o.intensity or 0.0 for o in ops]
    x_low, x_high = min(xs) / 4, max(xs) * 4
    bandwidth = section.mem_bandwidth_bytes_per_s
    roofs: dict[float, list[str]] = {}  # dtypes with the same peak share one roof
    for dtype, peak in section.peak_flops.items():
        roofs.setdefault(peak, []).append(dtype)
    for i, (peak, dtypes) in enumerate(sorted(roofs.items(), key=lambda kv: -kv[0])):
        dtype = "/".join(dtypes)
        ridge = peak / bandwidth if bandwidth else x_low
        ax.hlines(
            peak,
            max(ridge, x_low),
            max(x_high, ridge * 2),
            colors="#333333",
            linestyles="-" if i == 0 else "--",
            linewidth=1.2,
        )
        ax.annotate(
            f"peak {dtype}", (max(x_high, ridge * 2), peak), ha="right", va="bottom", fontsize=8
        )
        x_high = max(x_high, ridge * 2)
    if bandwidth and section.peak_flops:
        top = max(section.peak_flops.values())
        ridge = top / bandwidth
        ax.plot([x_low, ridge], [bandwidth * x_low, top], color="#333333", linewidth=1.2)
        ax.annotate(
            "memory bandwidth", (x_low, bandwidth * x_low), fontsize=8, rotation=0, va="bottom"
        )
    for key, colour in _BOUND_COLOURS.items():
        group = [o for o in ops if _bound_key(o.bound) == key]
        if group:
            ax.scatter(
                [o.intensity for o in group],
                [o.achieved_flops_per_s for o in group],
                s=[MIN_AREA + (MAX_AREA - MIN_AREA) * (o.time_us or 0.0) / biggest for o in group],
                color=colour,
                alpha=0.7,
                edgecolors="white",
                linewidths=0.5,
                label=f"{key}-bound",
            )
    for o in sorted(ops, key=lambda o: -(o.time_us or 0.0))[:LABELLED_OPS]:
        name = o.name if len(o.name) <= 40 else o.name[:39] + "…"
        ax.annotate(
            chart_text(name),
            (o.intensity, o.achieved_flops_per_s),
            fontsize=7,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved FLOP/s")
    legend = ax.legend(frameon=False, fontsize=8, loc="lower right")
    for handle in legend.legend_handles:  # one marker size in the legend, whatever the op's time
        handle.set_sizes([30.0])
    ax.grid(True, which="major", alpha=0.3)
    return to_svg(fig, "roofline")
