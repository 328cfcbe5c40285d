"""Knobs declared in one module (tests/unit/knobs/fixture_knob.py) and registered into the
catalogue reach the engine session, the script injection, the ladder's order, the joint search,
a serve variant and the patch writer with no edit anywhere else: a process setting and an
in-place model transform."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from fixture_knob import CALLS, FLUSH_DENORMAL, TAG_MODEL
from torch import nn

from torchdoctor.collect.inject import Injection
from torchdoctor.engine import prepare
from torchdoctor.knobs import Recipe, registered
from torchdoctor.serve import prepare_variant, variant_spec
from torchdoctor.tune import TrialResult, joint
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.patch import build_patch
from torchdoctor.tune.space import catalogue_space, static_prior
from torchdoctor.workloads import get_workload


@pytest.fixture(autouse=True)
def knob() -> Iterator[None]:
    CALLS.clear()
    with registered(FLUSH_DENORMAL), registered(TAG_MODEL):
        yield


def test_the_engine_session_applies_them_and_undoes_the_process_flag_at_close() -> None:
    workload = get_workload("mlp", features=8, hidden=16, layers=1, rows=64, batch_size=16)
    recipe = Recipe({"flush_denormal": True, "tag_model": True}, workload=workload, device="cpu")
    with prepare(workload, recipe, device="cpu") as session:
        model_class = type(session.raw_model).__name__
        assert [("apply", True), ("model", model_class)] == CALLS
        assert session.raw_model.tagged is True
        session.run_steps(1, measure_phases=False)
    assert CALLS[-1] == ("undo", True)


def test_the_script_injection_applies_it_and_records_it() -> None:
    with Injection({"flush_denormal": True}) as injection:
        assert CALLS == [("apply", True)]
    assert CALLS == [("apply", True), ("undo", True)]
    outcome = injection.record().outcome("flush_denormal")
    assert outcome is not None and outcome.status == "applied"
    assert outcome.applied_at == ["flush_denormal=true at start"]
    with Injection({"flush_denormal": False}) as injection:
        pass
    assert injection.record().outcome("flush_denormal").status == "unchanged"  # type: ignore[union-attr]


def test_the_injection_applies_a_model_transform_to_the_trained_model() -> None:
    model = nn.Linear(4, 2)
    with Injection({"tag_model": True}) as injection:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(3, 4)).sum().backward()
        opt.step()
    assert CALLS == [("model", "Linear")] and model.tagged is True
    outcome = injection.record().outcome("tag_model")
    assert outcome is not None and outcome.status == "applied"
    assert outcome.applied_at[0].startswith("tag_model=true on Linear at ")


def test_the_ladder_tries_them_at_their_declared_ranks() -> None:
    cpu = static_prior("cpu")
    assert cpu.index("threads") < cpu.index("flush_denormal") < cpu.index("num_workers")
    gpu = static_prior("cuda")
    assert gpu.index("threads") < gpu.index("flush_denormal") < gpu.index("optimizer_impl")
    assert gpu.index("checkpointing") < gpu.index("tag_model") == len(gpu) - 1
    assert static_prior("cpu")[-1] == "tag_model"  # unranked on a CPU: after the ranked ones
    spec = next(s for s in catalogue_space("cpu") if s.name == "flush_denormal")
    assert spec.values == (False, True) and spec.safety == "close" and spec.default is False


def test_the_patch_writer_writes_them(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text('"""Train."""\nimport torch\n\nprint(torch.ones(1))\n')
    recipe = {"flush_denormal": True, "tag_model": True}
    model = nn.Linear(4, 2)
    with Injection(recipe) as injection:
        model(torch.randn(3, 4))
    patch = build_patch(recipe, injection.record(), tmp_path, script=script)
    assert [(e.knob, e.file, e.line) for e in patch.edits] == [("flush_denormal", "train.py", 3)]
    assert "+torch.set_flush_denormal(True)\n" in patch.diff
    assert [(s.knob, s.code) for s in patch.snippets] == [("tag_model", "model.tagged = True")]


def test_the_joint_search_searches_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import optuna

    asked: list[dict[str, Any]] = []

    def measure(tuner: Any, key: str, recipe: dict[str, Any], safety: str) -> TrialResult:
        asked.append(dict(recipe))
        return TrialResult(
            key=key,
            kind="joint",
            step=len(asked),
            recipe=recipe,
            status="ok",
            decision="measured",
            outcome=Outcome.MEASURED,
            samples_per_s=1.0,
            peak_memory_bytes=1,
        )

    monkeypatch.setattr(joint, "_measure_joint", measure)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["maximize", "minimize"])
    tuner = SimpleNamespace(
        study=SimpleNamespace(optuna_study=study),
        stored={},
        budget=SimpleNamespace(remaining_s=lambda: 1e9),
        estimated_trial_s=lambda: 0.0,
        best_recipe={},
        trials=[],
        run_or_replay=lambda key, kind, run, store=True: run(),
    )
    space = catalogue_space("cpu")
    joint.refine_jointly(tuner, space, 2, None)  # type: ignore[arg-type]
    assert len(asked) == 2
    assert all(recipe["flush_denormal"] in (False, True) for recipe in asked)
    assert "tag_model" not in asked[0]  # not a joint knob: left at the best recipe's


def test_a_serve_variant_serves_it() -> None:
    spec, value = variant_spec("tag_model")
    assert spec.knob is TAG_MODEL and value is None
    model = nn.Linear(4, 2)
    prepared = prepare_variant("tag_model", model, torch.randn(3, 4), device="cpu")
    assert CALLS == [("serve", "Linear")]
    assert prepared.accuracy.passed and prepared.spec.tolerance.kind == "allclose"
    assert not hasattr(model, "tagged")  # served from a copy: the caller's model is as it was
    assert prepared.call(torch.randn(3, 4)).shape == (3, 2)
