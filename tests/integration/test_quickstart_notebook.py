"""examples/quickstart.ipynb: it calls the API as it is (checked on every run, in no time),
and it runs on a CPU, its cells executed in order in one namespace as a kernel would (a
study: it tunes for at most four minutes; it asserts no timing, so it runs with the untimed
studies).

nbclient is not among the test dependencies, so the cells are read from the notebook's JSON
and executed with `exec`; what a kernel adds (display of a cell's last value) is not needed
to check that the notebook works.
"""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

import torchdoctor

NOTEBOOK = Path(__file__).parents[2] / "examples" / "quickstart.ipynb"


def code_cells() -> list[str]:
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert notebook["nbformat"] == 4
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]


def test_the_notebook_calls_the_api_as_it_is() -> None:
    calls = []
    for source in code_cells():
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "torchdoctor"
            ):
                calls.append((node.func.attr, [k.arg for k in node.keywords]))
    assert {name for name, _ in calls} >= {"diagnose", "tune", "run", "report"}
    for name, keywords in calls:
        assert name in torchdoctor.__all__
        accepted = inspect.signature(getattr(torchdoctor, name)).parameters
        assert [k for k in keywords if k not in accepted] == []


@pytest.mark.study
# The notebook runs: its results' types, the budget it was given, a recipe that keeps the
# baseline's settings, a positive rate and the files written, whatever the A/B decided (the
# speedup's interval is a tuple whether or not a change was kept): no timing.
@pytest.mark.untimed
def test_the_notebook_runs_on_a_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A tuning study of 240 s on mlp with two knobs (a hard stop), a diagnosis and a run
    # around it: about five minutes. 60 s and 150 s did not cover even the baseline's
    # measurement (its quality references) at a load average of 16-18 on 2 cores.
    monkeypatch.chdir(tmp_path)  # the run folders go under torchdoctor-runs/ here
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for i, source in enumerate(code_cells()):
        exec(compile(source, f"{NOTEBOOK.name}[{i}]", "exec"), namespace)
    from torchdoctor.diagnose import Diagnosis
    from torchdoctor.engine import RunResult
    from torchdoctor.tune import TuneResult

    diagnosis, result, run = namespace["d"], namespace["t"], namespace["r"]
    assert isinstance(diagnosis, Diagnosis) and diagnosis.primary_bottleneck
    assert isinstance(result, TuneResult) and result.budget_s == 240
    assert set(result.best_recipe) >= set(result.baseline_recipe)
    assert isinstance(run, RunResult) and run.samples_per_s > 0
    assert run.recipe == {k: v for k, v in result.best_recipe.items() if k in run.recipe}
    report = Path(namespace["report_path"])
    assert report.is_file() and report.suffix == ".md"
    assert (Path(result.run_dir) / "tune.json").is_file()
