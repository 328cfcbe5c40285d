"""A script's quality reference run alone (arms in turns) is the reference run beside it.

Where a study's arms take turns on the GPU (tune/turns.py), no quality reference starts
beside a live arm: `ScriptArms.reference_alone` launches the perturbed script as a process of
its own. Its losses must be those the live worker's `Reference` request gives (a fresh launch
of the same script, recipe, seed and perturbation), or the yardstick would change with the
mode. Real launches of a zoo script, on the CPU.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from torchdoctor.procs import Reference, ScriptWorker
from torchdoctor.tune.arms import MeasurePlan
from torchdoctor.tune.sources import ScriptArms, ScriptCommand

ZOO = Path(__file__).resolve().parents[1] / "zoo"
CONTROL = str(ZOO / "control_well_tuned.py")
#: Generous per-request deadline: a launch imports torch (seconds on a loaded 2-core host).
TIMEOUT_S = 120.0

pytestmark = pytest.mark.slow


def test_a_reference_alone_trains_as_the_reference_beside_the_live_arm() -> None:
    argv = (CONTROL, "--steps", "1000")
    source = ScriptArms(ScriptCommand(argv), MeasurePlan(), "throughput", seed=0)
    alone = source.reference_alone({}, 1, 4, timeout=lambda: TIMEOUT_S, log_path=None)
    assert len(alone) == 4 and all(v is not None and math.isfinite(v) for v in alone)
    worker = ScriptWorker(list(argv), seed=0)
    try:
        beside = worker.request(Reference(1, 4), timeout_s=TIMEOUT_S).losses
        # The reference beside never launched the worker's own script; alone, nothing lives.
        assert worker.record().launches == 0
    finally:
        worker.close()
    assert list(beside) == alone
