"""What `scale` and `serve` show while they run: the plan, each stage as it ends, the current one.

`StageWatch` is told each stage as it begins (the progress messages that `scale.run_worlds`
and `serve.serve_target` give: "N=2: collective microbenchmark, then training 30 steps",
"batch size 8") and is, like `TuneWatch` for `tune`, a rich renderable that the CLI shows in a
`rich.live.Live` on a terminal: the plan first, then a row for each stage as it ends, with the
seconds it took, and below them the stage now running and the time so far. Where no terminal
watches, the CLI prints each stage as it begins, one plain line that a log keeps. It renders
what it is told; the only arithmetic is the clock's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text


@dataclass
class StageRow:
    """One stage that has ended, and the seconds it took."""

    what: str
    seconds: float


@dataclass
class StageWatch:
    """The live state of a command of stages (see the module docstring). `expected` is the
    number of stages the plan holds, when known (scale: one per world size)."""

    title: str
    plan: list[str] = field(default_factory=list)
    expected: int | None = None
    clock: Callable[[], float] = time.monotonic
    rows: list[StageRow] = field(default_factory=list)
    current: str | None = None
    current_since: float | None = None
    started: float | None = None

    def begin(self, what: str) -> StageRow | None:
        """`what` starts now; the stage before it, if any, ends and is returned."""
        now = self.clock()
        if self.started is None:
            self.started = now
        ended = self._end(now)
        self.current, self.current_since = what, now
        return ended

    def finish(self) -> StageRow | None:
        """The last stage ends (returned, if there was one)."""
        ended = self._end(self.clock())
        self.current = self.current_since = None
        return ended

    def _end(self, now: float) -> StageRow | None:
        if self.current is None:
            return None
        row = StageRow(self.current, now - (self.current_since or now))
        self.rows.append(row)
        return row

    def plan_table(self) -> Table:
        table = Table(title=self.title, box=box.SIMPLE_HEAD, show_edge=False, show_header=False)
        table.add_column("plan", overflow="fold")
        for line in self.plan:
            table.add_row(escape(line))
        return table

    def stages_table(self) -> Table:
        table = Table(title="Done so far", box=box.SIMPLE_HEAD, show_edge=False)
        table.add_column("#", justify="right")
        table.add_column("stage", overflow="fold")
        table.add_column("took", justify="right", no_wrap=True)
        for i, row in enumerate(self.rows):
            table.add_row(str(i), escape(row.what), f"{row.seconds:.0f} s")
        return table

    def status_line(self) -> Text:
        now = self.clock()
        elapsed = now - self.started if self.started is not None else 0.0
        done = f"{len(self.rows)} of {self.expected}" if self.expected else f"{len(self.rows)}"
        text = f"{done} done, {elapsed:.0f} s so far"
        if self.current is not None:
            since = now - self.current_since if self.current_since is not None else 0.0
            text = f"now: {self.current} ({since:.0f} s) | {text}"
        return Text(text)

    def __rich__(self) -> RenderableType:
        parts: list[RenderableType] = [self.plan_table()]
        if self.rows:
            parts.append(self.stages_table())
        parts.append(self.status_line())
        return Group(*parts)
