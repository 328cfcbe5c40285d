"""A recipe's workload parameters (`parts.WorkloadParameter`): the workload rebuilt with them.

Apart from `knobs/model_recipe.py`'s model transforms because it acts one step earlier: on the
workload, before the engine builds the model from it (a hand-written attention switched to
SDPA is another model class's forward, not a transform of the built one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchdoctor.core.errors import KnobNotApplicable
from torchdoctor.knobs.catalogue import catalogue
from torchdoctor.knobs.parts import KnobValue, WorkloadParameter


def parameter_changes(workload: Any, settings: Mapping[str, KnobValue]) -> dict[str, Any]:
    """Parameter -> value of each `WorkloadParameter` knob the settings set to a value the
    workload does not have already (None, a knob's default, asks for nothing)."""
    params = getattr(workload, "params", None) or {}
    changes: dict[str, Any] = {}
    for knob in catalogue():
        part = knob.applies_to
        value = settings.get(knob.name)
        if not isinstance(part, WorkloadParameter) or value is None:
            continue
        if params.get(part.parameter) != value:
            changes[part.parameter] = value
    return changes


def workload_under(workload: Any, settings: Mapping[str, KnobValue]) -> Any:
    """`workload` rebuilt with the recipe's workload parameters (itself when none changes)."""
    changes = parameter_changes(workload, settings)
    if not changes:
        return workload
    rebuild = getattr(workload, "with_params", None)
    if not callable(rebuild):
        name = getattr(workload, "name", type(workload).__name__)
        raise KnobNotApplicable(
            f"workload '{name}' cannot be rebuilt with {changes}",
            knob=next(iter(changes)),
            reason=f"workload '{name}' has no with_params(**changes) to rebuild it",
            hint="remove the knob from the recipe",
        )
    return rebuild(**changes)
