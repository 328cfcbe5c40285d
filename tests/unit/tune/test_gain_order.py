"""The ladder's order by expected gain: the diagnosis's Amdahl bounds (the H200's cnn
diagnosis, tests/data/h200/) put the knobs that can pay first and those that cannot last."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from torchdoctor.core import rundir
from torchdoctor.tune.ladder import LadderPlan
from torchdoctor.tune.prescriptions import diagnosed_bounds
from torchdoctor.tune.space import MIN_WORTHWHILE_BOUND, KnobSpec, order_knobs

H200 = Path(__file__).parents[2] / "data" / "h200"
#: The H200 demo's prescriptions in the diagnosis's own order (severity, then bound).
PRESCRIBED = ["num_workers", "pin_memory", "channels_last", "cudnn_benchmark", "non_blocking"]
PRIOR = ["precision", "compile", "channels_last", "cudnn_benchmark", "non_blocking", "tf32"]


def _specs(names: list[str]) -> list[KnobSpec]:
    return [KnobSpec(n, (False, True), "exact", False) for n in names]


@pytest.fixture
def bounds(tmp_path: Path) -> dict[str, float]:
    shutil.copyfile(H200 / "diagnosis.json", tmp_path / rundir.DIAGNOSIS)
    return diagnosed_bounds(tmp_path)


def test_a_knob_takes_the_largest_bound_of_its_findings(bounds: dict[str, float]) -> None:
    # pin_memory is prescribed by the data wait (3.7x) and the pageable copies (1.00x).
    assert bounds["pin_memory"] == pytest.approx(bounds["num_workers"]) and bounds["pin_memory"] > 3
    assert bounds["non_blocking"] < MIN_WORTHWHILE_BOUND
    assert diagnosed_bounds(H200 / "no-such-run") == {}


def test_knobs_that_cannot_clear_the_keep_bar_go_after_the_prior(
    bounds: dict[str, float],
) -> None:
    names = sorted(set(PRESCRIBED) | set(PRIOR))
    ordered = [s.name for s in order_knobs(_specs(names), PRESCRIBED, PRIOR, bounds)]
    # By bound: the data wait's knobs, then channels_last (1.024x); cudnn_benchmark (1.019x)
    # and non_blocking (1.0002x) cannot clear 2% and wait for the prior's knobs.
    assert ordered[:3] == ["num_workers", "pin_memory", "channels_last"]
    assert ordered.index("non_blocking") > ordered.index("tf32")
    assert ordered.index("cudnn_benchmark") > ordered.index("compile")
    # Without bounds (a caller's own prescriptions): in front, in the given order.
    plain = [s.name for s in order_knobs(_specs(names), PRESCRIBED, PRIOR)]
    assert plain[: len(PRESCRIBED)] == PRESCRIBED


def test_a_larger_bound_comes_first_whatever_the_prescribed_order() -> None:
    specs = _specs(["a", "b", "c"])
    ordered = order_knobs(specs, ["a", "b"], (), {"a": 1.1, "b": 1.8})
    assert [s.name for s in ordered] == ["b", "a", "c"]
    plan = LadderPlan(space=specs, prescribed=["a", "b"], prior=(), bounds={"a": 1.1, "b": 1.8})
    assert [s.name for s in plan.order()] == ["b", "a", "c"]
