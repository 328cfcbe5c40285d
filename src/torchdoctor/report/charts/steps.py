"""The step breakdown (stacked bars per phase) and the trace's per-step categories."""

from __future__ import annotations

from typing import Any

from torchdoctor.core.steps import PHASES
from torchdoctor.report.charts._svg import PALETTE, WIDTH_IN, chart_text, to_svg
from torchdoctor.report.views import StepSection, TimelineSection


def _stacked(
    plt: Any,
    name: str,
    labels: list[str],
    shares: list[dict[str, float]],
    keys: list[str],
    xlabel: str,
    scale: float,
) -> str:
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.6 + 0.45 * len(labels)))
    left = [0.0] * len(labels)
    for i, key in enumerate(keys):
        widths = [s.get(key, 0.0) * scale for s in shares]
        ax.barh(
            labels,
            widths,
            left=left,
            label=key.replace("_", " "),
            color=PALETTE[i % len(PALETTE)],
            height=0.6,
        )
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_xlabel(xlabel)
    ax.invert_yaxis()
    ax.legend(
        ncols=min(len(keys), 6),
        loc="lower left",
        bbox_to_anchor=(0, 1.0),
        frameon=False,
        fontsize=8,
    )
    return to_svg(fig, name)


def steps_chart(plt: Any, section: StepSection) -> str | None:
    if not section.bars:
        return None
    keys: list[str] = [p for p in PHASES if any(p in b.fractions for b in section.bars)]
    keys += sorted({k for b in section.bars for k in b.fractions} - set(keys))
    return _stacked(
        plt,
        "steps",
        [chart_text(b.label) for b in section.bars],
        [b.fractions for b in section.bars],
        keys,
        "share of step time (%)",
        100.0,
    )


def timeline_chart(plt: Any, section: TimelineSection) -> str | None:
    if not section.step_breakdown:
        return None
    keys = list(section.step_breakdown)
    return _stacked(
        plt,
        "timeline",
        ["average step"],
        [section.step_breakdown],
        keys,
        "share of step time (%)",
        1.0,
    )
