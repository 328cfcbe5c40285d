"""Stored studies read back after the process layer moved: a failure's kind is stored as the
word it always was, and a study's config naming the engine's factory by its old module still
names the engine's factory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchdoctor.procs import ENGINE_FACTORY, FailureKind
from torchdoctor.tune import Outcome, TrialResult, TuneConfig
from torchdoctor.tune.outcome import failure_outcome


@pytest.mark.parametrize("kind", list(FailureKind))
def test_a_failure_kind_is_stored_as_its_word_and_reads_back(kind: FailureKind) -> None:
    fields = {
        "key": "k",
        "kind": "ladder",
        "step": 1,
        "recipe": {},
        "decision": "failed",
        "outcome": failure_outcome(kind),
    }
    typed = TrialResult(**fields, status=kind, reason="why")
    worded = TrialResult(**fields, status=kind.value, reason="why")
    assert typed.to_json() == worded.to_json()
    assert json.loads(typed.to_json())["status"] == kind.value
    assert TrialResult.from_json_dict(json.loads(typed.to_json())) == worded
    assert typed.outcome is not Outcome.ERROR or kind is FailureKind.ERROR


def test_a_stored_config_naming_the_old_engine_factory_reads_as_the_engine(
    tmp_path: Path,
) -> None:
    stored = TuneConfig(workload="mlp").to_json_dict()
    stored["factory"] = "torchdoctor.tune.session_spec:engine_session"
    path = tmp_path / "tune_config.json"
    path.write_text(json.dumps(stored), encoding="utf-8")
    config = TuneConfig.read(path)
    assert config.factory == ENGINE_FACTORY
    assert config == TuneConfig(workload="mlp")


def test_a_users_own_factory_is_kept_as_written() -> None:
    assert TuneConfig(workload="w", factory="my_pkg.sessions:build").factory == (
        "my_pkg.sessions:build"
    )
