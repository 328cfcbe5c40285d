"""A recipe against the script (or workload) as it is, in fresh process pairs: `torchdoctor run
--recipe R --vs-baseline -- python train.py` (or `run WORKLOAD --recipe R --vs-baseline`).

The check a user runs to see a tuner's claim for themselves. It is the tuner's final A/B
(`confirm.measure_fresh_pairs`): each pair launches the script twice, once as it is and once
with the recipe injected (`ScriptArms`), warms both up by the settle rule, times `run`'s
steady window of each in alternating chunks, and the ratio's interval comes from the pairs
(`measure.replicated_speedup`), so it covers how much one process differs from another. A
workload's arms are the tuner's workload workers (`WorkloadArms`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Final

from torchdoctor.procs import SessionSpec
from torchdoctor.tune.arms import Arm, MeasurePlan
from torchdoctor.tune.budget import DEFAULT_TRIAL_TIMEOUT_S
from torchdoctor.tune.confirm import CONFIRM_PAIRS, measure_fresh_pairs
from torchdoctor.tune.records import Confirmation, recipe_key
from torchdoctor.tune.sources import ArmSource, ScriptArms, ScriptCommand, WorkloadArms

#: Key of the record `recheck_script` returns (one A/B, not a study's trial).
RECHECK_KEY: Final = "run-vs-baseline"


def recheck_script(
    command: ScriptCommand,
    recipe: dict[str, Any],
    *,
    pairs: int = CONFIRM_PAIRS,
    steps: int | None = None,
    seed: int | None = 0,
    log_dir: Path | None = None,
    timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S,
    confidence: float = MeasurePlan().confidence,
) -> Confirmation:
    """`recipe` against the script as it is: the speedup a new process sees, with its
    interval (a `Confirmation` whose baseline recipe is empty).

    `steps`: steady steps each process times (default: `run`'s window at the baseline's step
    time). Each request may take `timeout_s`; a failed launch is recorded, not raised.
    """
    source = ScriptArms(command, MeasurePlan(), "throughput", seed=seed)
    return _recheck(
        source,
        recipe,
        pairs=pairs,
        steps=steps,
        log_dir=log_dir,
        timeout_s=timeout_s,
        confidence=confidence,
    )


def recheck_workload(
    workload: str,
    recipe: dict[str, Any],
    *,
    device: str = "cpu",
    pairs: int = CONFIRM_PAIRS,
    steps: int | None = None,
    seed: int = 0,
    log_dir: Path | None = None,
    timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S,
    confidence: float = MeasurePlan().confidence,
) -> Confirmation:
    """`recipe` against the workload as it is (no knob set), each arm a fresh workload worker
    as the tuner's: the speedup a new process sees, with its interval."""
    spec = SessionSpec(workload=workload, recipe={}, device=device, seed=seed)
    source = WorkloadArms(spec, MeasurePlan(), "throughput")
    return _recheck(
        source,
        recipe,
        pairs=pairs,
        steps=steps,
        log_dir=log_dir,
        timeout_s=timeout_s,
        confidence=confidence,
    )


def _recheck(
    source: ArmSource,
    recipe: dict[str, Any],
    *,
    pairs: int,
    steps: int | None,
    log_dir: Path | None,
    timeout_s: float,
    confidence: float,
) -> Confirmation:
    opened = 0

    def open_arm(arm_recipe: dict[str, Any], tag: str) -> Arm:
        nonlocal opened
        opened += 1
        log = log_dir / f"worker-{opened:03d}-{tag}.log" if log_dir is not None else None
        return source.open(arm_recipe, timeout=lambda: timeout_s, log_path=log)

    return measure_fresh_pairs(
        open_arm,
        {},
        dict(recipe),
        key=f"{RECHECK_KEY}:{recipe_key(recipe)}",
        step=0,
        steps=steps,
        pairs=pairs,
        timeout=lambda: timeout_s,
        confidence=confidence,
        clock=time.monotonic,
    )
