"""The gap to linear scaling as a waterfall per world size: from the ideal step, each part of
the gap in turn, to the measured mean step."""

from __future__ import annotations

from typing import Any

from torchdoctor.report.charts._svg import PALETTE, WIDTH_IN, to_svg


def waterfall_chart(
    plt: Any, worlds: list[tuple[int, float, list[tuple[str, float]]]]
) -> str | None:
    """`worlds`: (N, the ideal step in seconds, the gap's parts (label, seconds)) per N > 1."""
    if not worlds:
        return None
    fig, axes = plt.subplots(1, len(worlds), figsize=(WIDTH_IN, 3.2), squeeze=False)
    labels = [label for label, _ in worlds[0][2]]
    for ax, (n, ideal, parts) in zip(axes[0], worlds, strict=True):
        level = ideal * 1e3
        ax.bar(0, level, color="#999999", width=0.7)
        for i, (_, seconds) in enumerate(parts, start=1):
            step = seconds * 1e3
            ax.bar(i, step, bottom=level, color=PALETTE[(i - 1) % len(PALETTE)], width=0.7)
            level += step
        ax.bar(len(parts) + 1, level, color="#000000", width=0.7)
        ax.set_xticks(
            range(len(parts) + 2),
            ["linear", *(str(i) for i in range(1, len(parts) + 1)), "measured"],
        )
        ax.set_title(f"N = {n}", fontsize=9)
        ax.set_ylabel("ms per step" if ax is axes[0][0] else "")
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=PALETTE[i % len(PALETTE)]) for i in range(len(labels))
    ]
    fig.legend(
        handles,
        [f"{i}: {label}" for i, label in enumerate(labels, start=1)],
        loc="lower center",
        ncols=2,
        fontsize=7,
        frameon=False,
    )
    fig.subplots_adjust(bottom=0.32)
    return to_svg(fig, "scale_waterfall")
