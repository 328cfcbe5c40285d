"""`log_to_wandb(source, ...)`: torchdoctor's results as Weights & Biases metrics.

The scalars `integrations/scalars.py` reads from a record or a run folder, each logged with
its own x-axis: a tag's step (a ladder rung, a training step, a batch size) is logged beside it
as `step/<tag>` and declared its step metric (`define_metric`), so a ladder's rungs and a run's
steps do not share W&B's one global step. Logs into the run given, or into a new run that
this call starts and finishes; `mode="offline"` writes it to disk for `wandb sync` later (the
`[wandb]` extra brings the library).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from torchdoctor.core.errors import UsageError
from torchdoctor.core.records import Record
from torchdoctor.integrations.scalars import scalars_of

#: The project a new run is started in when none is named.
DEFAULT_PROJECT = "torchdoctor"

Mode = Literal["online", "offline", "disabled"]


def log_to_wandb(
    source: Record | str | Path,
    *,
    run: Any | None = None,
    project: str = DEFAULT_PROJECT,
    name: str | None = None,
    mode: Mode | None = None,
    directory: str | Path | None = None,
) -> int:
    """Log the scalars of `source` (a record, or every record of a run folder) to W&B.

    `run`: an active `wandb` run to log into (left open); otherwise a new run is started in
    `project` (named `name`, in `mode`: "online", "offline" or "disabled", W&B's default when
    None; its files under `directory`) and finished. Returns how many scalars were logged.
    """
    try:
        import wandb
    except ImportError:
        raise UsageError(
            "logging to Weights & Biases needs the wandb package",
            hint="pip install 'torchdoctor[wandb]'",
        ) from None
    written = scalars_of(source)
    own = run is None
    if run is None:
        run = wandb.init(
            project=project,
            name=name,
            mode=mode,
            dir=str(directory) if directory is not None else None,
            settings=wandb.Settings(console="off", silent=True),
        )
    target: Any = run
    try:
        declared: set[str] = set()
        for tag, value, step in written:
            axis = f"step/{tag}"
            if tag not in declared:
                target.define_metric(tag, step_metric=axis)
                declared.add(tag)
            target.log({tag: value, axis: step})
    finally:
        if own:
            target.finish()
    return len(written)


__all__ = ["DEFAULT_PROJECT", "log_to_wandb"]
