"""Progress of an API call drawn in a notebook: a rich progress bar in the cell's output.

In a Jupyter kernel (`core/notebook.py`, `in_notebook`) `torchdoctor.diagnose`, `tune` and
`run` show how far they are, as the commands do on a terminal; in a script or a terminal
IPython they print nothing (a library call that writes to the terminal uninvited is noise,
and the commands draw their own). rich renders to the notebook through IPython's display
(with ipywidgets, the bar updates in place; without, it is drawn once as it ends).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from torchdoctor.core import notebook

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


def make_progress() -> Progress:
    """The bar a notebook shows: what runs, a bar, done of total, time so far."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )


class Bar:
    """One task of a notebook's progress display."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self.progress = progress
        self.task = task

    def update(
        self, done: float, total: float | None = None, *, description: str | None = None
    ) -> None:
        """`done` of `total` (the total as it was when not given), and what runs now."""
        kwargs: dict[str, object] = {"completed": done}
        if total is not None:
            kwargs["total"] = total
        if description is not None:
            kwargs["description"] = description
        self.progress.update(self.task, **kwargs)  # type: ignore[arg-type]

    def advance(self, by: float = 1, *, description: str | None = None) -> None:
        self.progress.update(self.task, advance=by, description=description)


@contextmanager
def notebook_progress(description: str, total: float | None = None) -> Iterator[Bar | None]:
    """A progress bar in the notebook's cell while the block runs, or None outside a notebook.

    `total=None`: what the work will count is not known yet (it is set by `Bar.update`)."""
    if not notebook.in_notebook():
        yield None
        return
    progress = make_progress()
    task = progress.add_task(description, total=total)
    with progress:
        yield Bar(progress, task)
