"""A knob declared in one module (tests/unit/knobs/fixture_knob.py) and registered into the
catalogue reaches the engine session, the script injection, the ladder's order and the patch
writer with no edit anywhere else."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fixture_knob import CALLS, FLUSH_DENORMAL

from torchdoctor.collect.inject import Injection
from torchdoctor.engine import prepare
from torchdoctor.knobs import Recipe, registered
from torchdoctor.tune.patch import build_patch
from torchdoctor.tune.space import catalogue_space, static_prior
from torchdoctor.workloads import get_workload


@pytest.fixture(autouse=True)
def knob() -> Iterator[None]:
    CALLS.clear()
    with registered(FLUSH_DENORMAL):
        yield


def test_the_engine_session_applies_it_and_undoes_it_at_close() -> None:
    workload = get_workload("mlp", features=8, hidden=16, layers=1, rows=64, batch_size=16)
    recipe = Recipe({"flush_denormal": True}, workload=workload, device="cpu")
    with prepare(workload, recipe, device="cpu") as session:
        assert CALLS == [("apply", True)]
        session.run_steps(1, measure_phases=False)
    assert CALLS == [("apply", True), ("undo", True)]


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


def test_the_ladder_tries_it_at_its_declared_rank() -> None:
    cpu = static_prior("cpu")
    assert cpu.index("threads") < cpu.index("flush_denormal") < cpu.index("num_workers")
    gpu = static_prior("cuda")
    assert gpu.index("threads") < gpu.index("flush_denormal") < gpu.index("optimizer_impl")
    spec = next(s for s in catalogue_space("cpu") if s.name == "flush_denormal")
    assert spec.values == (False, True) and spec.safety == "close" and spec.default is False


def test_the_patch_writer_writes_its_line(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text('"""Train."""\nimport torch\n\nprint(torch.ones(1))\n')
    recipe = {"flush_denormal": True}
    with Injection(recipe) as injection:
        pass
    patch = build_patch(recipe, injection.record(), tmp_path, script=script)
    assert [(e.knob, e.file, e.line) for e in patch.edits] == [("flush_denormal", "train.py", 3)]
    assert "+torch.set_flush_denormal(True)\n" in patch.diff
    assert patch.snippets == []
