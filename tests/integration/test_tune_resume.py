"""SIGKILL the tuner mid-study, resume it: no completed trial is lost or run again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from torchdoctor.tune import Study, TuneConfig, tune
from torchdoctor.tune.config import STUDY_FILE
from torchdoctor.tune.space import KnobSpec
from tune_sim import sim_config, with_plan

KNOBS = [KnobSpec(f"noop{i}", (False, True), "exact", False) for i in range(6)]

_CHILD = """
import sys
from pathlib import Path
from torchdoctor.tune import TuneConfig, tune
config = TuneConfig.read(sys.argv[1])
tune(config=config, out=Path(sys.argv[2]))
"""


def _completed_keys(run: Path) -> list[str]:
    db = run / STUDY_FILE
    if not db.exists():
        return []
    try:
        return [r.key for r in Study(f"sqlite:///{db}").records()]
    except Exception:  # the child may still be creating the schema
        return []


@pytest.mark.study  # a tuner in its own process, killed mid-study and resumed
@pytest.mark.untimed  # which trials are stored and prepared, whatever their verdicts
def test_sigkill_then_resume_loses_and_reruns_nothing(tmp_path: Path) -> None:
    log = tmp_path / "prepared.jsonl"
    config: TuneConfig = with_plan(
        sim_config(KNOBS, noise=0.01, base_step_s=0.02, sleep=True, log_path=str(log)), rounds=4
    )
    config_path = tmp_path / "config.json"
    config.write(config_path)
    run = tmp_path / "run"
    # The child imports the simulated session from tests/, as the workers it spawns do.
    tests_dir = str(Path(__file__).resolve().parents[1])
    paths = [tests_dir, *filter(None, [os.environ.get("PYTHONPATH")])]
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(config_path), str(run)],
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
    )
    try:
        deadline = time.monotonic() + 120
        while len(_completed_keys(run)) < 3 and time.monotonic() < deadline:
            assert child.poll() is None, "the tuner ended before it could be killed"
            time.sleep(0.1)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    before = {r.key: r for r in Study(f"sqlite:///{run / STUDY_FILE}").records()}
    assert 3 <= len(before) < 1 + len(KNOBS), "kill must land mid-study"
    assert json.loads((run / "run.json").read_text())["status"] == "running"

    result = tune(resume=run, config=config)

    after = list(Study(f"sqlite:///{run / STUDY_FILE}").records())
    keys = [r.key for r in after]
    assert len(keys) == len(set(keys)), "a trial was stored twice"
    for key, record in before.items():
        assert next(r for r in after if r.key == key) == record  # not lost, not replaced
    assert result.n_reused == len(before)
    assert result.n_trials == 1 + len(KNOBS)  # baseline + one trial per knob
    # Each candidate finished before the kill was prepared by its own trial only (never
    # re-run): once, or twice when its first A/B said faster and a second pair of fresh
    # processes was opened to check it (`Tuner._replicate`).
    prepared = Counter(log.read_text().splitlines())
    for record in before.values():
        if record.kind == "ladder":
            own = 1 if record.replicate_speedup_vs_best is None else 2
            assert prepared[json.dumps(record.recipe, sort_keys=True)] == own
    assert json.loads((run / "run.json").read_text())["status"] == "complete"
