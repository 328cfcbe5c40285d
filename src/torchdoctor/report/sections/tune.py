"""The tune's sections: the ladder and its trials, the Pareto front, loss parity (tune.json
and trials/)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters.tune import (
    ladder_section,
    loss_curves,
    pareto_points,
    trial_views,
)
from torchdoctor.report.load import RunRecords
from torchdoctor.report.markdown import table_lines
from torchdoctor.report.registry import Section, register_section
from torchdoctor.report.sections.result import tune_terminal_view
from torchdoctor.report.views import LossCurve, ParetoPointView, TuneView

if TYPE_CHECKING:
    from rich.console import Console

    from torchdoctor.tune import TuneResult


def tune_view(found: RunRecords) -> TuneView:
    tune = found.records.get("tune")
    return TuneView(
        ladder=ladder_section(tune) if tune else None,
        trials=trial_views(found.trials) if found.trials else None,
    )


def tune_markdown(view: TuneView) -> list[str]:
    out: list[str] = []
    if view.ladder:
        out += ["## Tuning ladder", ""]
        out += table_lines(
            [
                "step",
                "change",
                "throughput (baseline scale)",
                "speedup",
                "CI",
                "its A/B: best \u2192 with it",
                "peak memory",
                "loss vs baseline",
                "verdict",
            ],
            [
                (
                    r.step,
                    r.change,
                    fmt.rate(r.scaled_samples_per_s),
                    fmt.speedup(r.speedup),
                    fmt.interval(r.ci_low, r.ci_high),
                    fmt.ab_rates(r.best_samples_per_s, r.samples_per_s) if r.step else "",
                    fmt.nbytes(r.peak_memory_bytes),
                    fmt.signed_percent(r.loss_deviation) if r.step else "",
                    r.verdict,
                )
                for r in view.ladder.rungs
            ],
        )
        if view.ladder.rejected:
            out += ["### Rejected changes", ""]
            out += table_lines(
                [
                    "change",
                    "status",
                    "throughput (baseline scale)",
                    "speedup vs best",
                    "CI",
                    "its A/B: best \u2192 with it",
                    "why",
                ],
                [
                    (
                        r.change,
                        r.status,
                        fmt.rate(r.scaled_samples_per_s),
                        fmt.speedup(r.speedup),
                        fmt.interval(r.ci_low, r.ci_high),
                        fmt.ab_rates(r.best_samples_per_s, r.samples_per_s),
                        r.reason,
                    )
                    for r in view.ladder.rejected
                ],
            )
        out += [view.ladder.caption, ""]
    if view.trials:
        out += ["### Trials", ""]
        out += table_lines(
            ["trial", "change", "status", "decision", "throughput", "reason"],
            [
                (t.label, t.change, t.status, t.decision, t.throughput, t.reason)
                for t in view.trials
            ],
        )
    return out


def tune_charts(plt: Any, view: TuneView) -> dict[str, str | None]:
    from torchdoctor.report.charts.tune import ladder_chart

    return {"ladder": ladder_chart(plt, view.ladder) if view.ladder else None}


def pareto_view(found: RunRecords) -> list[ParetoPointView] | None:
    tune = found.records.get("tune")
    return pareto_points(tune) if tune else None


def pareto_markdown(view: list[ParetoPointView] | None) -> list[str]:
    if not view:
        return []
    rows = [(p.recipe, fmt.rate(p.samples_per_s), fmt.nbytes(p.peak_memory_bytes)) for p in view]
    return ["## Pareto front", "", *table_lines(["recipe", "throughput", "peak memory"], rows)]


def pareto_charts(plt: Any, view: list[ParetoPointView] | None) -> dict[str, str | None]:
    from torchdoctor.report.charts.tune import pareto_chart

    return {"pareto": pareto_chart(plt, view) if view else None}


def parity_view(found: RunRecords) -> list[LossCurve] | None:
    return loss_curves(found.trials) if found.trials else None


def parity_terminal(console: Console, view: list[LossCurve]) -> None:
    """The loss curves' ends as a table: the chart's numbers, where no chart can be drawn."""
    from torchdoctor.report.blocks import Blocks, blocks_terminal
    from torchdoctor.report.blocks import Table as BlocksTable

    def loss(value: float | None) -> str:
        # None stands for a NaN or infinite loss (the trial's record).
        return "non-finite" if value is None else f"{value:.4f}"

    rows = [
        [c.label, fmt.number(len(c.losses)), loss(c.losses[0]), loss(c.losses[-1])]
        for c in view
        if c.losses
    ]
    if rows:
        table = BlocksTable(header=["run", "losses", "first", "last"], rows=rows)
        blocks_terminal(console, Blocks(title="Loss parity", tables=[table]))


def parity_charts(plt: Any, view: list[LossCurve] | None) -> dict[str, str | None]:
    from torchdoctor.report.charts.tune import parity_chart

    return {"parity": parity_chart(plt, view) if view else None}


def ladder_terminal(console: Console, result: TuneResult) -> None:
    from torchdoctor.report.terminal.tune import render_ladder

    render_ladder(console, result)


def pareto_terminal(console: Console, result: TuneResult) -> None:
    from torchdoctor.report.terminal.tune import render_pareto

    render_pareto(console, result)


# On a terminal the result prints the ladder and the front within it (report/terminal/tune.py).
LADDER = register_section(
    Section(
        name="ladder",
        reads=("tune", "trials"),
        adapter=tune_view,
        order=7,
        markdown_order=6,
        markdown=tune_markdown,
        html="sections/ladder.html.j2",
        terminal=ladder_terminal,
        terminal_view=tune_terminal_view,
        within="result",
        charts=tune_charts,
    )
)
PARETO = register_section(
    Section(
        name="pareto",
        reads=("tune",),
        adapter=pareto_view,
        order=40,
        markdown_order=8,
        markdown=pareto_markdown,
        html="sections/pareto.html.j2",
        terminal=pareto_terminal,
        terminal_view=tune_terminal_view,
        within="result",
        charts=pareto_charts,
    )
)
#: A chart only: the loss curves have no table, so no Markdown form.
PARITY = register_section(
    Section(
        name="parity",
        reads=("trials",),
        adapter=parity_view,
        order=50,
        markdown_order=None,
        html="sections/parity.html.j2",
        terminal=parity_terminal,
        charts=parity_charts,
    )
)
