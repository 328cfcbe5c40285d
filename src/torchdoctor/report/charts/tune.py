"""The ladder as a waterfall of speedups, the Pareto front, and the loss-parity curves."""

from __future__ import annotations

import math
from typing import Any

from torchdoctor.report.charts._svg import PALETTE, WIDTH_IN, chart_text, to_svg
from torchdoctor.report.views import LadderSection, LossCurve, ParetoPointView


def ladder_chart(plt: Any, ladder: LadderSection) -> str | None:
    """Each rung a bar from the previous rung's cumulative speedup to its own, with its CI."""
    rungs = ladder.rungs
    if not rungs:
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.8 + 0.5 * len(rungs)))
    labels = [
        chart_text(f"{r.step}. {r.change}" if len(r.change) < 45 else f"{r.step}. {r.change[:44]}…")
        for r in rungs
    ]
    previous = 1.0
    for i, r in enumerate(rungs):
        # Waterfall: each kept change adds its own gain on top of the rung before it.
        start = 1.0 if r.step == 0 else previous
        colour = PALETTE[2] if r.speedup >= start else PALETTE[5]
        ax.barh(i, r.speedup - start, left=start, color=colour, height=0.55)
        has_ci = math.isfinite(r.ci_low) and math.isfinite(r.ci_high)
        if has_ci:
            below, above = max(r.speedup - r.ci_low, 0.0), max(r.ci_high - r.speedup, 0.0)
            ax.errorbar(
                r.speedup,
                i,
                xerr=[[below], [above]],
                fmt="o",
                color="#222222",
                markersize=3,
                capsize=3,
                linewidth=1,
            )
        right = max(r.speedup, r.ci_high) if has_ci else r.speedup
        ax.annotate(
            f"{r.speedup:.2f}x",
            (right, i),
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
        previous = r.speedup
    ax.axvline(1.0, color="#555555", linewidth=0.8)
    ax.set_yticks(range(len(rungs)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("speedup vs baseline (x), with confidence interval")
    return to_svg(fig, "ladder")


def pareto_chart(plt: Any, points: list[ParetoPointView]) -> str | None:
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.6))
    mib = [p.peak_memory_bytes / 2**20 for p in points]
    ax.plot(mib, [p.samples_per_s for p in points], "o-", color=PALETTE[0])
    ax.set_xlabel("peak memory (MiB)")
    ax.set_ylabel("throughput (samples/s)")
    ax.grid(True, alpha=0.3)
    return to_svg(fig, "pareto")


def parity_chart(plt: Any, curves: list[LossCurve]) -> str | None:
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.6))
    for i, curve in enumerate(curves):
        steps = [s for s, v in enumerate(curve.losses) if v is not None]
        values = [v for v in curve.losses if v is not None]
        label = curve.label if len(curve.label) < 60 else curve.label[:59] + "…"
        ax.plot(
            steps,
            values,
            label=chart_text(label),
            color=PALETTE[i % len(PALETTE)],
            linewidth=2.0 if i == 0 else 1.2,
            linestyle="-" if i == 0 else "--",
        )
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.legend(frameon=False, fontsize=8)
    ax.grid(True, alpha=0.3)
    return to_svg(fig, "parity")
