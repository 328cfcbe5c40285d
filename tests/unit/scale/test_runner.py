"""A job past its deadline stops the study with a message that names it (no process started:
the launcher is faked, and so is the clock)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from torchdoctor.collect import ScriptProfile
from torchdoctor.core.errors import ScaleError
from torchdoctor.scale import StudyPlan, run_worlds, runner


def test_a_job_past_its_deadline_is_named_and_its_tree_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    asked: dict[str, Any] = {}

    def fake_run_script(argv: list[str], **kwargs: Any) -> ScriptProfile:
        asked.update(kwargs)
        now[0] += kwargs["timeout_s"]  # the launcher waited the whole deadline, then ended it
        return ScriptProfile(argv=argv, exit_code=-15)

    monkeypatch.setattr(runner, "run_script", fake_run_script)
    monkeypatch.setattr(runner, "time", SimpleNamespace(monotonic=lambda: now[0]))
    plan = StudyPlan(nprocs=[2], workload="mlp", job_timeout_s=42.0)
    with pytest.raises(ScaleError, match=r"job at N=2 \(node 0\) did not finish within .* 42 s"):
        run_worlds(plan, tmp_path, lambda _: None)
    assert asked["timeout_s"] == 42.0 and asked["kill_tree"] is True
