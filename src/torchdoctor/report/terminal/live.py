"""What `tune` and `demo` show while they run: the diagnosis, then the ladder filling in.

`TuneWatch` is fed the study's events (the diagnosis, the ladder's planned order, each trial
as it starts and as it is decided, the budget) and is both a rich renderable, which the CLI
shows in a `rich.live.Live` on a terminal, and a source of plain lines (`line_of`), which it
prints where no terminal watches, so that a log keeps one line per event. It renders records;
the only arithmetic is the clock's (seconds left, the time the budget ends).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from torchdoctor.diagnose import Diagnosis
from torchdoctor.report.format import longest_word, value_text
from torchdoctor.tune import Confirmation, PeakMemory, Trial, TrialResult

#: How many findings the diagnosis table lists (the ones with the largest bound on gain).
SHOWN_FINDINGS = 5


def change_text(change: dict[str, Any]) -> str:
    return " ".join(f"{k}={value_text(v)}" for k, v in change.items()) or "baseline"


def _ci(ci: tuple[float, float] | None) -> str:
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""


@dataclass
class DecidedRow:
    """One decided trial as the live ladder shows it."""

    what: str
    verdict: str
    speedup: str
    interval: str
    why: str


def row_of(trial: Trial) -> DecidedRow:
    """A decided trial (ladder trial or the final A/B) as one row."""
    if isinstance(trial, Confirmation):
        speed = f"{trial.speedup:.2f}x" if trial.speedup is not None else "-"
        return DecidedRow(
            "final A/B vs the baseline",
            "measured" if trial.ok else trial.status,
            speed,
            _ci(trial.speedup_ci),
            trial.reason or f"{len(trial.rates)} fresh process pairs",
        )
    assert isinstance(trial, TrialResult)
    speed = f"{trial.speedup_vs_best:.2f}x" if trial.speedup_vs_best is not None else "-"
    why = trial.reason if trial.status == "ok" else f"{trial.status}: {trial.reason}"
    peak = PeakMemory.of(trial.chunk_peak_memory_bytes)
    if trial.kind == "memory" and not why and peak is not None:
        why = f"peak {peak.describe()}"  # the memory ladder (tune --objective fit) keeps by it
    if trial.sharing_mode == "turns":  # one process on the GPU at a time (tune/turns.py)
        turns = (
            "arms take turns on the GPU: two processes of the job do not fit"
            if trial.kind == "baseline"
            else f"in turns: {len(trial.chunk_times_s)} pairs of whole runs"
        )
        why = f"{why}; {turns}" if why else turns
    return DecidedRow(
        change_text(trial.change) if trial.kind != "baseline" else "baseline",
        trial.decision,
        speed if trial.kind != "baseline" else "1.00x",
        _ci(trial.speedup_vs_best_ci) if trial.kind != "baseline" else "",
        why,
    )


@dataclass
class TuneWatch:
    """The live state of a study, shown as it changes (see the module docstring)."""

    budget_s: float
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    diagnosis: Diagnosis | None = None
    planned: list[str] = field(default_factory=list)
    rows: list[DecidedRow] = field(default_factory=list)
    current: str | None = "the baseline"
    current_since: float | None = None
    started: float | None = None
    elapsed_s: float = 0.0
    #: The current trial's A/B so far: (speedup, interval, scored rounds) at its last look
    so_far: tuple[float, tuple[float, float], int] | None = None

    def start(self, planned: list[str]) -> None:
        self.planned = list(planned)
        self.started = self.clock()
        self.current_since = self.started

    def begin(self, change: dict[str, Any]) -> None:
        self.current = change_text(change)
        self.current_since = self.clock()
        self.so_far = None

    def look(self, estimate: Any, rounds: int) -> None:
        """The current trial's A/B at a look (a `measure.PairedSpeedup`)."""
        self.so_far = (estimate.speedup, (estimate.ci_low, estimate.ci_high), rounds)

    def decided(self, trial: Trial, elapsed_s: float) -> DecidedRow:
        row = row_of(trial)
        self.rows.append(row)
        self.elapsed_s = elapsed_s
        # What runs next is said by the next `begin`; between trials the final A/B may run.
        self.current = "the final A/B" if not isinstance(trial, Confirmation) else None
        self.current_since = self.clock()
        self.so_far = None
        return row

    # plain lines, for a log

    def diagnosis_lines(self) -> list[str]:
        lines = []
        if self.diagnosis is not None:
            d = self.diagnosis
            lines.append(
                f"diagnosis: primary bottleneck {d.primary_bottleneck} "
                f"({d.primary_share:.0%} of the step)"
            )
            for f in self._findings():
                lines.append(f"  finding: {f.title} (at most {f.amdahl_bound:.2f}x)")
        if self.planned:
            lines.append(f"ladder order: {', '.join(self.planned)}")
        return lines

    def line_of(self, row: DecidedRow) -> str:
        left = max(0.0, self.budget_s - self.elapsed_s)
        parts = [f"trial {len(self.rows)}: {row.what}: {row.verdict} {row.speedup}"]
        if row.interval:
            parts.append(row.interval)
        if row.why:
            parts.append(f"({row.why})")
        return " ".join(parts) + f" | budget left {left:.0f} s"

    # the live view

    def _findings(self) -> list[Any]:
        if self.diagnosis is None:
            return []
        ranked = sorted(self.diagnosis.findings, key=lambda f: -f.amdahl_bound)
        return ranked[:SHOWN_FINDINGS]

    def diagnosis_table(self) -> Table:
        # The labels wrap at their words, never inside one: the figures column is short and
        # never wraps, and the long ladder order is a line of its own below (`planned_line`),
        # which squeezed this column to a few characters at 80 columns when it was a row.
        table = Table(title="Diagnosis", box=box.SIMPLE_HEAD, show_edge=False)
        table.add_column("what", ratio=1, min_width=min(longest_word(self._labels()), 30))
        table.add_column("", justify="right", no_wrap=True)
        if self.diagnosis is not None:
            d = self.diagnosis
            table.add_row(
                f"[bold]primary bottleneck: {escape(str(d.primary_bottleneck))}[/]",
                f"{d.primary_share:.0%} of the step",
            )
            for f in self._findings():
                table.add_row(escape(f.title), f"at most {f.amdahl_bound:.2f}x")
        return table

    def _labels(self) -> list[str]:
        if self.diagnosis is None:
            return []
        return [f"primary bottleneck: {self.diagnosis.primary_bottleneck}"] + [
            f.title for f in self._findings()
        ]

    def planned_line(self) -> Text | None:
        """The ladder's order as one paragraph, wrapped between knobs."""
        if not self.planned:
            return None
        return Text("ladder, in order: " + ", ".join(self.planned), overflow="fold")

    def ladder_table(self) -> Table:
        table = Table(title="Ladder so far", box=box.SIMPLE_HEAD, show_edge=False)
        table.add_column("#", justify="right")
        table.add_column(
            "trial", overflow="fold", min_width=longest_word(r.what for r in self.rows)
        )
        table.add_column("verdict")
        table.add_column("speedup", justify="right")
        table.add_column("CI", justify="right", no_wrap=True)
        table.add_column("why", overflow="fold")
        colours = {"kept": "green", "baseline": "cyan", "measured": "green"}
        for i, row in enumerate(self.rows):
            colour = colours.get(row.verdict, "yellow")
            table.add_row(
                str(i),
                escape(row.what),
                f"[{colour}]{escape(row.verdict)}[/]",
                row.speedup,
                row.interval,
                escape(row.why),
            )
        return table

    def status_line(self) -> Text:
        now = self.clock()
        elapsed = now - self.started if self.started is not None else self.elapsed_s
        left = max(0.0, self.budget_s - elapsed)
        end = time.strftime("%H:%M:%S", time.localtime(self.wall() + left))
        text = f"budget left {left:.0f} s of {self.budget_s:.0f} s, ends by {end}"
        if self.current is not None:
            since = now - self.current_since if self.current_since is not None else 0.0
            now_text = f"now: {self.current} ({since:.0f} s"
            if self.so_far is not None:
                speedup, ci, rounds = self.so_far
                now_text += f", A/B so far {speedup:.2f}x {_ci(ci)} after {rounds} rounds"
            text = now_text + ") | " + text
        return Text(text)

    def __rich__(self) -> RenderableType:
        parts: list[RenderableType] = [self.diagnosis_table()]
        planned = self.planned_line()
        if planned is not None:
            parts.append(planned)
        if self.rows:
            parts.append(self.ladder_table())
        parts.append(self.status_line())
        return Group(*parts)
