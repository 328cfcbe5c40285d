"""DataLoader candidates that fit the machine: at most the usable cores on every device, the
diagnosis's own worker count among them, persistent workers paired with each."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

import torchdoctor.tune.space as space_mod
from torchdoctor.core import rundir
from torchdoctor.knobs import NUM_WORKERS, PERSISTENT_WORKERS
from torchdoctor.tune.ladder import candidate_changes
from torchdoctor.tune.prescriptions import diagnosed_values
from torchdoctor.tune.space import catalogue_space, with_diagnosed, worker_candidates
from torchdoctor.tune.tuner import Tuner

H200 = Path(__file__).parents[2] / "data" / "h200"


def test_worker_counts_are_the_usable_cores_halved_and_none() -> None:
    assert worker_candidates(16, 32) == (16, 8, 4, 0)
    assert worker_candidates(2, 32) == (2, 1, 0)
    assert worker_candidates(1, 32) == (1, 0)
    assert worker_candidates(64, 32) == (32, 16, 8, 0)  # the knob's own ceiling still holds


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_no_device_tries_more_workers_than_cores(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The H200 host's 16 cores were tried with 32 workers: the cap held only on a CPU."""
    monkeypatch.setattr(space_mod, "usable_cores", lambda: 16)
    spec = next(s for s in catalogue_space(device) if s.name == NUM_WORKERS.name)
    assert spec.values == (16, 8, 4, 0)
    assert spec.change(8) == {NUM_WORKERS.name: 8, PERSISTENT_WORKERS.name: True}
    assert spec.change(0) == {NUM_WORKERS.name: 0}


def test_the_h200_diagnosis_prescribes_four_workers(tmp_path: Path) -> None:
    shutil.copyfile(H200 / "diagnosis.json", tmp_path / rundir.DIAGNOSIS)
    values = diagnosed_values(tmp_path)
    assert values[NUM_WORKERS.name] == 4
    assert diagnosed_values(tmp_path / "nothing-here") == {}


def test_the_diagnosed_value_joins_the_candidates_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(space_mod, "usable_cores", lambda: 16)
    spec = next(s for s in catalogue_space("cuda") if s.name == NUM_WORKERS.name)
    (three,) = with_diagnosed([spec], {NUM_WORKERS.name: 3})
    assert three.values == (3, 16, 8, 4, 0)
    (same,) = with_diagnosed([spec], {NUM_WORKERS.name: 4})  # already a candidate
    assert same.values == spec.values
    (capped,) = with_diagnosed([spec], {NUM_WORKERS.name: 32})  # past the cores
    assert capped.values == spec.values


def test_the_ladder_tries_each_worker_count_with_persistent_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(space_mod, "usable_cores", lambda: 4)
    spec = next(s for s in catalogue_space("cuda") if s.name == NUM_WORKERS.name)
    spec = space_mod.replace(spec, default=0)
    tuner = cast(Tuner, SimpleNamespace(best_recipe={}, own_settings={}, trials=[]))
    skipped: dict[str, list[str]] = {}
    changes: list[dict[str, Any]] = candidate_changes(tuner, spec, None, skipped)
    assert changes == [
        {NUM_WORKERS.name: 4, PERSISTENT_WORKERS.name: True},
        {NUM_WORKERS.name: 2, PERSISTENT_WORKERS.name: True},
        {NUM_WORKERS.name: 1, PERSISTENT_WORKERS.name: True},
    ]
