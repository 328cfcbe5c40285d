"""The diagnosis orders the ladder: knobs of the largest bound on gain first."""

from __future__ import annotations

from types import SimpleNamespace

from torchdoctor.tune.prescriptions import prescribed_knobs
from torchdoctor.tune.space import KnobSpec, order_knobs


def _finding(rule: str, bound: float, knobs: dict[str, object]) -> SimpleNamespace:
    return SimpleNamespace(
        rule_id=rule, amdahl_bound=bound, severity="medium",
        prescription=SimpleNamespace(knobs=knobs),
    )  # fmt: skip


def test_prescribed_knobs_follow_the_bound_on_gain_without_repeats() -> None:
    diagnosis = SimpleNamespace(
        findings=[
            _finding("small", 1.1, {"set_to_none": True}),
            _finding("data", 2.5, {"num_workers": 2, "persistent_workers": True}),
            _finding("compute", 1.8, {"compile": "default", "num_workers": 2}),
        ]
    )
    assert prescribed_knobs(diagnosis) == [
        "num_workers", "persistent_workers", "compile", "set_to_none",
    ]  # fmt: skip


def test_prescribed_knobs_lead_then_the_static_prior() -> None:
    specs = [KnobSpec(n, (False, True), "exact", False) for n in ("set_to_none", "compile", "x")]
    ordered = [s.name for s in order_knobs(specs, prescribed=["set_to_none", "unknown"])]
    assert ordered == ["set_to_none", "compile", "x"]
