"""A recipe tuned on a torchrun job, run at another world size: what that does to training.

The tuner measures a job at the world size it was given; `run --recipe RUN_DIR -- torchrun`
may run the recipe at another. The speed knobs carry over; the effective batch does not, and
with it the learning rate's meaning (diagnose's `world_size_changed` rule says how).
"""

from __future__ import annotations

import json
from pathlib import Path

from torchdoctor.tune.config import CONFIG_FILE
from torchdoctor.tune.torchrun import is_torchrun, job_world_size


def world_size_note(tune_dir: Path, world_size: int | None, batch: int | None) -> str | None:
    """When `tune_dir` (a tune run folder) tuned a torchrun job at another world size than
    `world_size` (a run of its recipe): diagnose's `world_size_changed` finding in one line,
    its summary and prescription (the effective batch moved, and the learning rate with it)."""
    from torchdoctor.diagnose import (
        RULES,
        DataLoaderEvidence,
        DistributedEvidence,
        Evidence,
    )

    config = Path(tune_dir) / CONFIG_FILE
    if world_size is None or not config.is_file():
        return None
    try:
        tuned = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    command, module = tuned.get("command"), bool(tuned.get("module"))
    if not isinstance(command, list) or not is_torchrun(command, module):
        return None
    finding = RULES["world_size_changed"](
        Evidence(
            source="script",
            world_size=world_size,
            distributed=DistributedEvidence(baseline_world_size=job_world_size(command)),
            dataloader=DataLoaderEvidence(uses_dataloader=batch is not None, batch_size=batch),
        )
    )
    if finding is None:
        return None
    return f"{finding.summary} {finding.prescription.code_change}."
