"""The live view of a command of stages (`scale`, `serve`): `stage_progress`.

On a terminal, a `rich.live.Live` on stderr shows the command's plan, a row for each stage as
it ends and the stage now running (report/terminal/live_stages.py's `StageWatch`); where no
terminal watches, or with --json, each stage is one plain line on stderr as it begins, which a
log keeps. stdout is left to the result (with --json, the one JSON document).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.live import Live
from rich.markup import escape

from torchdoctor.cli.state import err_console, progress_enabled

#: Redraws per second: the clocks of the current stage and of the whole run tick.
LIVE_REFRESH_PER_S = 1


@contextmanager
def stage_progress(
    title: str,
    plan: list[str],
    *,
    prefix: str = "",
    expected: int | None = None,
    ticking: bool = True,
) -> Iterator[Callable[[str], None]]:
    """Yields the `progress(message)` a command calls as each stage begins (see the module
    docstring). `prefix` begins each plain line (e.g. "serve mlp: "). Without `ticking` the
    view is redrawn only as stages change, never from rich's refresh thread: for a command
    that times work in this process (`serve`), where a redraw would hold the GIL in the middle
    of a timed request."""
    if not progress_enabled():

        def say(message: str) -> None:
            err_console.print(f"[dim]{escape(prefix + message)}[/]", highlight=False)

        yield say
        return
    from torchdoctor.report import StageWatch

    watch = StageWatch(title=title, plan=plan, expected=expected)
    with Live(
        watch,
        console=err_console,
        auto_refresh=ticking,
        refresh_per_second=LIVE_REFRESH_PER_S,
    ) as live:

        def show(message: str) -> None:
            watch.begin(message)
            live.refresh()

        yield show  # on an error the view stops with the stage that failed as the current one
        watch.finish()
        live.refresh()
