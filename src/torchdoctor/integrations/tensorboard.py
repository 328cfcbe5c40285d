"""`write_scalars(source, log_dir)`: torchdoctor's results as TensorBoard scalars.

The SummaryWriter format (torch.utils.tensorboard, which needs the `tensorboard` package: the
`[tensorboard]` extra), so `tensorboard --logdir LOG_DIR` shows them beside a job's own curves.
What a source contributes is `integrations/scalars.py`'s, shared with the W&B and MLflow sinks.
"""

from __future__ import annotations

from pathlib import Path

from torchdoctor.core.errors import UsageError
from torchdoctor.core.records import Record
from torchdoctor.integrations.scalars import scalars, scalars_of


def write_scalars(source: Record | str | Path, log_dir: str | Path) -> int:
    """Write the scalars of `source` (a record, or every record of a run folder) as TensorBoard
    events under `log_dir`; returns how many were written."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise UsageError(
            "writing TensorBoard scalars needs the tensorboard package",
            hint="pip install 'torchdoctor[tensorboard]'",
        ) from None
    written = scalars_of(source)
    writer = SummaryWriter(log_dir=str(log_dir))
    try:
        for tag, value, step in written:
            writer.add_scalar(tag, value, global_step=step)
    finally:
        writer.close()
    return len(written)


__all__ = ["scalars", "write_scalars"]
