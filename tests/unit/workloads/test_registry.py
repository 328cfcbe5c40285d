from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.core.errors import WorkloadError
from torchdoctor.engine import run_workload
from torchdoctor.knobs import Recipe
from torchdoctor.workloads import Workload, get_workload, list_workloads

USER_FILE = """
from torchdoctor.workloads import get_workload

def make(rows=128):
    return get_workload("mlp", rows=rows, batch_size=16)

def broken():
    raise RuntimeError("no data today")

def not_a_workload():
    return 42

value = 3
"""


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_job.py"
    path.write_text(USER_FILE)
    return path


def test_builtins_are_listed_and_satisfy_the_protocol() -> None:
    workloads = list_workloads()
    assert [w.name for w in workloads] == ["cnn", "gpt", "mlp", "recsys"]
    assert {w.kind for w in workloads} == {"vision", "language", "tabular", "recsys"}
    for w in workloads:
        assert isinstance(w, Workload) and w.description and w.sample_unit


def test_parameters_reach_the_workload() -> None:
    cnn = get_workload("cnn", decode_cost_us=1234.0)
    assert cnn.build_dataset(0).decode_cost_us == 1234.0  # type: ignore[attr-defined]


def test_unknown_workload_and_bad_parameter() -> None:
    with pytest.raises(WorkloadError, match=r"unknown workload 'resnet'.*cnn, gpt, mlp, recsys"):
        get_workload("resnet")
    with pytest.raises(WorkloadError, match="rejected its parameters"):
        get_workload("cnn", colour=True)


def test_user_workload_loads_by_path_and_runs(user_file: Path) -> None:
    wl = get_workload(f"{user_file}:make", rows=64)
    assert wl.name == "mlp"
    result = run_workload(
        wl, Recipe(), steps=2, warmup_steps=1, settle_warmup=False, measure_phases=False
    )
    assert len(result.losses) == 3


def test_user_workload_file_missing(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"workload file '.*nope\.py' does not exist"):
        get_workload(f"{tmp_path}/nope.py:make")


@pytest.mark.parametrize(
    ("factory", "pattern"),
    [
        ("missing", "has no callable 'missing'"),
        ("value", "has no callable 'value'"),
        ("broken", "raised RuntimeError: no data today"),
        ("not_a_workload", "returned int, not a Workload"),
    ],
)
def test_user_workload_errors(user_file: Path, factory: str, pattern: str) -> None:
    with pytest.raises(WorkloadError, match=pattern):
        get_workload(f"{user_file}:{factory}")


def test_user_file_that_fails_to_import(tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    path.write_text("import no_such_module_xyz\n")
    with pytest.raises(WorkloadError, match=r"importing workload file .* failed"):
        get_workload(f"{path}:make")
