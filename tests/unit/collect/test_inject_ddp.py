"""DDP knobs injected where an unmodified script builds its DistributedDataParallel module:
each keyword reaches the constructor, a comm hook is registered on the built module, a value
the script already runs is not applied with why, and uninstalling puts the constructor back.

The module is a stand-in with DDP's constructor signature (building a real one imports
torch's compiler stack, seconds here); real DDP takes these keywords in the 2-rank study
(tests/integration/test_tune_torchrun.py).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from torch import nn

import torchdoctor.collect.probes.ddp as ddp_probe
from torchdoctor.collect.hooks import CollectConfig, Instrumentation
from torchdoctor.collect.inject import Injection, InjectionRecord
from torchdoctor.knobs import Recipe
from torchdoctor.tune.space import catalogue_space

#: DDP's own keyword defaults, read from torch's constructor.
DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(
        nn.parallel.DistributedDataParallel.__init__
    ).parameters.items()
    if p.default is not inspect.Parameter.empty
}


class FakeDDP:
    """Records what it was built with and the hook registered on it."""

    def __init__(
        self,
        module: nn.Module,
        device_ids: Any = None,
        bucket_cap_mb: int | None = DEFAULTS["bucket_cap_mb"],
        find_unused_parameters: bool = DEFAULTS["find_unused_parameters"],
        gradient_as_bucket_view: bool = DEFAULTS["gradient_as_bucket_view"],
        static_graph: bool = DEFAULTS["static_graph"],
    ) -> None:
        self.module = module
        self.find_unused_parameters = find_unused_parameters  # as DDP keeps it
        self.kwargs = {
            "bucket_cap_mb": bucket_cap_mb,
            "find_unused_parameters": find_unused_parameters,
            "gradient_as_bucket_view": gradient_as_bucket_view,
            "static_graph": static_graph,
        }
        self.hook: Any = None

    def register_comm_hook(self, state: Any, hook: Any) -> None:
        self.hook = hook


@pytest.fixture(autouse=True)
def fake_ddp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ddp_probe, "ddp_class", lambda: FakeDDP)


def _outcome(record: InjectionRecord, knob: str) -> tuple[str, str | None, list[str]]:
    outcome = record.outcome(knob)
    assert outcome is not None
    return outcome.status, outcome.reason, outcome.applied_at


def test_ddp_keywords_reach_the_module_the_script_builds() -> None:
    recipe = {
        "bucket_cap_mb": 100,
        "gradient_as_bucket_view": True,
        "static_graph": True,
        "ddp_comm_hook": "fp16",
    }
    original = vars(FakeDDP)["__init__"]
    with Injection(recipe, device="cpu") as injection:
        model = FakeDDP(nn.Linear(4, 2), bucket_cap_mb=10)  # the script's own 10 MB
    assert vars(FakeDDP)["__init__"] is original
    assert model.kwargs == {
        "bucket_cap_mb": 100,
        "find_unused_parameters": False,
        "gradient_as_bucket_view": True,
        "static_graph": True,
    }
    assert model.hook.__name__ == "fp16_compress_hook"
    record = injection.record()
    for knob in recipe:
        status, _, where = _outcome(record, knob)
        assert status == "applied", knob
        assert where and "test_inject_ddp.py" in where[0]
    assert "(was 10)" in _outcome(record, "bucket_cap_mb")[2][0]
    assert "fp16_compress_hook" in _outcome(record, "ddp_comm_hook")[2][0]


def test_a_value_the_script_already_runs_is_not_applied_with_why() -> None:
    with Injection({"find_unused_parameters": False, "bucket_cap_mb": 25}, device="cpu") as inj:
        FakeDDP(nn.Linear(4, 2))  # DDP's defaults: no unused-parameter search, 25 MB buckets
    record = inj.record()
    status, reason, _ = _outcome(record, "find_unused_parameters")
    assert status == "not_applied"
    assert reason == (
        "the script's DistributedDataParallel already runs with find_unused_parameters=false"
    )
    assert _outcome(record, "bucket_cap_mb")[0] == "not_applied"


def test_the_unused_parameter_search_is_turned_off() -> None:
    with Injection({"find_unused_parameters": False}, device="cpu") as inj:
        model = FakeDDP(nn.Linear(4, 2), find_unused_parameters=True)
    assert model.kwargs["find_unused_parameters"] is False
    assert _outcome(inj.record(), "find_unused_parameters")[0] == "applied"


def test_a_refused_hook_leaves_the_job_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: FakeDDP, state: Any, hook: Any) -> None:
        raise TypeError("BF16 all reduce communication hook required CUDA 11+")

    monkeypatch.setattr(FakeDDP, "register_comm_hook", refuse)
    with Injection({"ddp_comm_hook": "fp16"}, device="cpu") as inj:
        model = FakeDDP(nn.Linear(4, 2))
    assert model.hook is None
    status, reason, _ = _outcome(inj.record(), "ddp_comm_hook")
    assert status == "not_applied" and reason is not None and "CUDA 11+" in reason


def test_a_script_without_ddp_says_so() -> None:
    with Injection({"static_graph": True}, device="cpu") as inj:
        nn.Linear(4, 2)
    status, reason, _ = _outcome(inj.record(), "static_graph")
    assert (status, reason) == ("not_applied", "the script built no DistributedDataParallel module")


def test_ddp_knobs_do_not_apply_to_a_workload_and_bf16_needs_cuda() -> None:
    from torchdoctor.core.errors import KnobNotApplicable
    from torchdoctor.workloads import get_workload

    with pytest.raises(KnobNotApplicable, match="built-in workload runs in one process"):
        Recipe.from_dict({"static_graph": True}, workload=get_workload("mlp"), device="cpu")
    with pytest.raises(KnobNotApplicable, match="NCCL"):
        Recipe.from_dict({"ddp_comm_hook": "bf16"}, device="cpu")
    Recipe.from_dict({"ddp_comm_hook": "fp16"}, device="cpu")  # a script on a CPU: fine
    values = {s.name: s.values for s in catalogue_space("cpu")}
    assert values["bucket_cap_mb"] == (100, 5)  # around DDP's 25 MB, larger first
    assert values["find_unused_parameters"] == (False,)


def test_under_the_instrumentation_the_probe_sees_what_the_recipe_built() -> None:
    # A rank's order: the probes first, the injection over them (collect/_rank.py).
    inst = Instrumentation(CollectConfig(warmup=0, profile_steps=0, cuda_events=False))
    injection = Injection({"find_unused_parameters": False, "static_graph": True}, device="cpu")
    inst.install()
    injection.install()
    try:
        model = FakeDDP(nn.Linear(4, 2), find_unused_parameters=True)
    finally:
        injection.uninstall()
        inst.uninstall()
    assert model.kwargs["find_unused_parameters"] is False and model.kwargs["static_graph"]
    assert inst.ddp.find_unused == [False]
    assert _outcome(injection.record(), "static_graph")[0] == "applied"
