"""Helpers for tuner tests: studies over simulated sessions (fast, deterministic, no torch)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from torchdoctor.tune import Confirmation, KnobSpec, MeasurePlan, TuneConfig
from torchdoctor.tune.api import knob_space_config
from torchdoctor.tune.records import read_trial

#: The simulated session factory (tests/sim_session.py). tests/ is on sys.path (conftest),
#: and spawned workers start with their parent's sys.path, so they import it too.
SIMULATED_FACTORY = "sim_session:make_session"

FAST_KNOB = KnobSpec("fast", (False, True), "close", False)
NOOP_KNOB = KnobSpec("noop", (False, True), "exact", False)
NAN_KNOB = KnobSpec("fp16_no_scaler", (False, True), "close", False)
DIVERGE_KNOB = KnobSpec("bad_lr", (False, True), "semantic", False)


def sim_config(
    specs: list[KnobSpec], *, isolate: bool = False, search_batch: bool = False, **model: Any
) -> TuneConfig:
    options: dict[str, Any] = {"base_step_s": 0.01, "noise": 0.03, "base_batch": 32}
    options.update(model)
    return TuneConfig(
        workload="sim",
        factory=SIMULATED_FACTORY,
        factory_options=options,
        space=knob_space_config(specs),
        isolate=isolate,
        search_batch=search_batch,
        budget_s=300,
        trial_timeout_s=20,
        # Simulated steps take no wall time: fixed 4-step chunks keep these tests fast.
        plan=MeasurePlan(min_chunk_s=0.0),
    )


def with_plan(config: TuneConfig, **changes: Any) -> TuneConfig:
    """`config` with these settings of its measurement plan changed."""
    return config.model_copy(update={"plan": replace(config.plan, **changes)})


def study_story(run: Path) -> str:
    """What a tuning study did, trial by trial with its wall time, then its notes: for an
    assertion's message."""
    lines = []
    for path in sorted((run / "trials").iterdir()):
        t = read_trial(path)
        if isinstance(t, Confirmation):
            # A confirmation cut short (too few pairs in the budget) has no speedup.
            speedup = "no speedup" if t.speedup is None else f"{t.speedup:.3f}x"
            lines.append(f"confirm {t.status} {speedup} {t.reason} ({t.wall_s:.1f} s)")
        else:
            lines.append(
                f"{t.kind} {t.change} {t.status} {t.decision} {t.reason} ({t.wall_s:.1f} s)"
            )
    tune = run / "tune.json"
    notes = json.loads(tune.read_text()).get("notes", []) if tune.exists() else []
    return "\n".join([*lines, *map(str, notes)])
