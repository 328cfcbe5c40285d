"""A tune's sections on a terminal (what `torchdoctor tune` and `demo` print): the result,
which prints within it the ladder and its rejected changes, the Pareto front and the memory
ladder (report/sections/result.py, tune.py, fit.py name these forms), in the order a person
reads them: the result first, the tables, then the best recipe, every note and the command
that re-checks the claim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from torchdoctor.core.errors import RecordError
from torchdoctor.core.rundir import display_path
from torchdoctor.report import format as fmt
from torchdoctor.report.adapters.result import result_section
from torchdoctor.report.format import longest_word
from torchdoctor.report.records import TUNE_CONFIG
from torchdoctor.tune import FitLadder, TuneConfig, TuneResult


def _fmt_ci(ci: tuple[float, float] | None, config: dict[str, Any] | None = None) -> str:
    """The headline's interval with its level (the study's confidence) where it is known."""
    plan = (config or {}).get("plan") or {}
    return fmt.interval(ci[0], ci[1], plan.get("confidence")) if ci else ""


def fmt_change(change: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in change.items()) or "baseline"


def _fmt_mem(value: int | None) -> str:
    return f"{value / 2**20:.0f} MiB" if value else "-"


def _fmt_rate(value: float | None) -> str:
    return f"{value:,.1f}" if value is not None else "-"


def _ab(best: float | None, candidate: float | None) -> str:
    """Both arms of one A/B in whole samples/s ('529\u2192612'): narrow enough for 80 columns."""
    if best is None or candidate is None:
        return "-"
    return f"{best:,.0f}\u2192{candidate:,.0f}"


def _fmt_range(ci: tuple[float, float] | None) -> str:
    return f"{ci[0]:.2f}-{ci[1]:.2f}" if ci else ""


def _config(result: TuneResult) -> dict[str, Any] | None:
    """The study's settings beside the result (the headline interval's level), if readable."""
    path = Path(result.run_dir) / TUNE_CONFIG.file
    try:
        return TuneConfig.read(path).to_json_dict() if path.is_file() else None
    except RecordError:
        return None


def tune_result_view(tune: dict[str, Any] | None) -> TuneResult | None:
    """The tune's sections' terminal view: tune.json's record (None: no tune)."""
    return TuneResult.from_json_dict(tune) if tune else None


def render_result(result: TuneResult, console: Console) -> None:
    """The result first (the sentence every form of the report leads with, and why its two
    speedups differ), then the ladder of kept changes, the rejected ones, the Pareto front,
    the best recipe, every note and the command that re-checks the claim."""
    config = _config(result)
    # RUN: the run folder, printed last (a long path would wrap the command).
    lead = result_section(result.to_json_dict(), config, "RUN") if result.fit is None else None
    if lead is not None:
        console.print(f"[bold]Result:[/] {escape(lead.sentence)}")
        console.print(lead.speedups, style="dim", highlight=False)
    render_ladder(console, result)
    render_pareto(console, result)
    trials = (
        f"{result.n_trials} trials, {result.n_failed} failed, {result.n_reused} reused, "
        f"{result.elapsed_s:.0f} s of {result.budget_s:.0f} s"
    )
    if result.fit is not None:
        render_fit(console, result)
        fit = result.fit
        console.print(
            f"Best: [bold]{fmt_change(result.best_recipe)}[/] peaks at "
            f"{_fmt_mem(fit.peak_memory_bytes)}, "
            f"[bold]{'under' if fit.fits else 'over'}[/] the cap of "
            f"{_fmt_mem(fit.max_memory_bytes)} ({trials})"
        )
    else:
        console.print(
            f"Best: [bold]{fmt_change(result.best_recipe)}[/] at "
            f"{result.best_samples_per_s:,.1f} samples/s = [bold]{result.speedup:.2f}x[/] the "
            f"baseline ({_fmt_ci(result.speedup_ci, config)}, {trials})"
        )
    for note in result.notes:
        console.print(f"  note: {note}", highlight=False)
    if lead is not None:
        console.print(lead.legend, style="dim", highlight=False)
        if lead.recheck:
            console.print("Re-check the claim (RUN: the run folder below):", highlight=False)
        for command in lead.recheck:
            console.print(f"  {command}", highlight=False)
    console.print(f"Run folder: {display_path(Path(result.run_dir))}")


def render_ladder(console: Console, result: TuneResult) -> None:
    """The ladder section's terminal form: the kept changes, then the rejected ones."""
    # Every rung after the baseline is a kept change, so there is no verdict column; the
    # columns are sized to fit an 80-column terminal with the change names whole.
    table = Table(
        title=f"Ladder: {result.workload} ({result.objective})",
        caption="Samples/s: the baseline's measured rate times the speedup, one scale down "
        "the ladder. A/B: best\u2192with it, both arms of the paired comparison that "
        "decided the row, as measured then (the host drifts between trials; compare within "
        "a row). Speedup: vs "
        "the baseline, the product of each rung's paired A/B. Loss: late-loss deviation from "
        "the baseline's. Raw figures: tune.json, report.html.",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("#", justify="right")
    # Long knob=value changes (compile=max-autotune) fold onto a second line, so that the
    # table fits an 80-column terminal.
    table.add_column(
        "Change",
        overflow="fold",
        min_width=max(15, longest_word(fmt_change(r.change) for r in result.ladder.rungs)),
    )
    table.add_column("Samples/s", justify="right")
    table.add_column("Speedup, CI", justify="right", no_wrap=True)
    table.add_column("A/B", justify="right", no_wrap=True)
    table.add_column("Memory", justify="right", no_wrap=True)
    table.add_column("Loss", justify="right", no_wrap=True)
    for rung in result.ladder.rungs:
        table.add_row(
            str(rung.step),
            fmt_change(rung.change),
            _fmt_rate(rung.scaled_samples_per_s),
            f"{rung.speedup_vs_baseline:.2f}x"
            + (f" {_fmt_range(rung.speedup_vs_baseline_ci)}" if rung.step else ""),
            _ab(rung.best_samples_per_s, rung.samples_per_s) if rung.step else "",
            _fmt_mem(rung.peak_memory_bytes),
            fmt.signed_percent(rung.loss_deviation)
            if rung.step and rung.loss_deviation is not None
            else "",
        )
    console.print(table)
    if result.ladder.rejected:
        rejected = Table(title="Rejected changes", box=box.SIMPLE_HEAD)
        rejected.add_column(
            "Change",
            overflow="fold",
            min_width=max(20, longest_word(fmt_change(r.change) for r in result.ladder.rejected)),
        )
        rejected.add_column("Samples/s", justify="right")
        rejected.add_column("vs best", justify="right")
        rejected.add_column("A/B", justify="right", no_wrap=True)
        rejected.add_column("Why", overflow="fold")
        for rej in result.ladder.rejected:
            speed = f"{rej.speedup_vs_best:.2f}x" if rej.speedup_vs_best else "-"
            why = rej.reason if rej.status == "ok" else f"{rej.status}: {rej.reason}"
            rejected.add_row(
                fmt_change(rej.change),
                _fmt_rate(rej.scaled_samples_per_s),
                speed,
                _ab(rej.best_samples_per_s, rej.samples_per_s),
                why,
            )
        console.print(rejected)


def render_pareto(console: Console, result: TuneResult) -> None:
    """The Pareto front section's terminal form (nothing when the front is empty)."""
    if result.pareto_front:
        front = Table(title="Pareto front (throughput vs peak memory)")
        front.add_column("Recipe")
        front.add_column("Throughput", justify="right")
        front.add_column("Peak memory", justify="right")
        for p in result.pareto_front:
            front.add_row(
                fmt_change(p.recipe), f"{p.samples_per_s:,.1f}/s", _fmt_mem(p.peak_memory_bytes)
            )
        console.print(front)


def render_fit(console: Console, result: TuneResult) -> None:
    """The memory ladder section's terminal form (`--objective fit`; nothing otherwise)."""
    if result.fit is not None:
        _render_fit(result.fit, console)


def _render_fit(fit: FitLadder, console: Console) -> None:
    """The memory ladder (`--objective fit`): each trial's peak, its spread, and the batch."""
    goal = (
        f"the effective batch of {fit.target_batch}"
        if fit.target_batch is not None
        else "the largest batch"
    )
    table = Table(
        title=f"Memory ladder: {goal} under {_fmt_mem(fit.max_memory_bytes)}",
        caption="Peak: median of the steady chunks' peaks, with their range; kept only when "
        "every peak is below the best's and the loss stays within the baseline's spread. "
        "Samples/s measured alone (indicative).",
        box=box.SIMPLE_HEAD,
    )
    for column in ("#", "Change", "Batch", "Peak", "Range", "Fits", "Samples/s", "Decision"):
        table.add_column(
            column,
            justify="left" if column in ("Change", "Decision") else "right",
            overflow="fold",
        )
    for row in fit.rows:
        spread = row.peak_spread_bytes
        table.add_row(
            str(row.step),
            fmt_change(row.change),
            f"{row.batch_size} x {row.grad_accum}" if row.grad_accum > 1 else str(row.batch_size),
            _fmt_mem(row.peak_memory_bytes),
            f"{spread[0] / 2**20:.1f}-{spread[1] / 2**20:.1f}" if spread else "-",
            {True: "yes", False: "no", None: "-"}[row.fits],
            _fmt_rate(row.samples_per_s),
            row.kind if row.kind == "baseline" else "kept" if row.kept else row.outcome,
        )
    console.print(table)
