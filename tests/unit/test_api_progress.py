"""Progress in a notebook: in a Jupyter kernel `torchdoctor.run`, `tune` and `diagnose` draw a
rich progress bar in the cell; in a script, nothing. The kernel is faked the way IPython shows
itself (`IPython.get_ipython()` returning a kernel's shell)."""

from __future__ import annotations

import importlib
import io
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.progress import Progress

import torchdoctor
from torchdoctor.core.notebook import in_notebook

progress_module = importlib.import_module("torchdoctor.api.progress")
TRACE = Path(__file__).parents[1] / "data" / "diff" / "job_data_wait.json.gz"


class ZMQInteractiveShell:
    """What a Jupyter kernel's `get_ipython()` returns (its class's name is what counts)."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}


class TerminalInteractiveShell(ZMQInteractiveShell):
    """A terminal IPython's shell."""


def fake_ipython(monkeypatch: pytest.MonkeyPatch, shell: object | None) -> None:
    module = types.ModuleType("IPython")
    module.get_ipython = lambda: shell  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", module)


@pytest.fixture
def bars(monkeypatch: pytest.MonkeyPatch) -> list[Progress]:
    """The progress displays made, drawn into a string instead of a notebook."""
    made: list[Progress] = []

    def make() -> Progress:
        made.append(Progress(console=Console(file=io.StringIO(), force_terminal=False)))
        return made[-1]

    monkeypatch.setattr(progress_module, "make_progress", make)
    return made


def test_a_kernel_is_a_notebook_a_terminal_or_a_script_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert not in_notebook()
    fake_ipython(monkeypatch, None)  # IPython imported, no shell running
    assert not in_notebook()
    fake_ipython(monkeypatch, TerminalInteractiveShell())
    assert not in_notebook()
    fake_ipython(monkeypatch, ZMQInteractiveShell())
    assert in_notebook()
    other = TerminalInteractiveShell()
    other.config = {"IPKernelApp": {}}  # a kernel whose shell is another class (Colab's)
    fake_ipython(monkeypatch, other)
    assert in_notebook()


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The engine's run replaced by one that reports 5 of 5 steps as the engine does
    (`progress(done, total)` after each step), so the bar's wiring is checked in no time."""
    engine_module = importlib.import_module("torchdoctor.engine")
    totals: list[int] = []

    def run_workload(job: Any, recipe: Any, *, progress: Any, **_: Any) -> Any:
        for done in range(1, 6):
            if progress is not None:
                progress(done, 5)
        totals.append(5)
        return types.SimpleNamespace(model_copy=lambda update: update)

    monkeypatch.setattr(engine_module, "run_workload", run_workload)
    return totals


def test_run_in_a_notebook_draws_its_steps(
    monkeypatch: pytest.MonkeyPatch, bars: list[Progress], engine: list[int]
) -> None:
    fake_ipython(monkeypatch, ZMQInteractiveShell())
    torchdoctor.run("mlp", recipe={"threads": 1}, steps=4, device="cpu")
    [bar] = bars
    [task] = bar.tasks
    assert engine == [5] and task.description == "run mlp"
    assert task.total == 5 and task.completed == 5


def test_a_callers_own_progress_is_called_instead_of_the_bar(
    monkeypatch: pytest.MonkeyPatch, bars: list[Progress], engine: list[int]
) -> None:
    fake_ipython(monkeypatch, ZMQInteractiveShell())
    calls: list[tuple[int, int]] = []
    torchdoctor.run("mlp", steps=4, device="cpu", progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (5, 5) and bars[0].tasks[0].completed == 0


def test_run_in_a_script_draws_nothing(bars: list[Progress], engine: list[int]) -> None:
    assert not in_notebook()
    torchdoctor.run("mlp", steps=2, device="cpu")
    assert engine == [5] and bars == []


def test_tune_in_a_notebook_moves_one_step_per_decided_trial(
    monkeypatch: pytest.MonkeyPatch, bars: list[Progress]
) -> None:
    fake_ipython(monkeypatch, ZMQInteractiveShell())
    seen: dict[str, float | None] = {}

    def study(*, config: Any, out: Any, on_start: Any, on_trial: Any) -> str:
        on_start(None, 3)
        task = bars[0].tasks[0]
        seen["planned"], seen["at_start"] = task.total, task.completed
        for change in ({}, {"threads": 1}, {"num_workers": 2}):
            on_trial(types.SimpleNamespace(change=change), None)
        return "result"

    monkeypatch.setattr(importlib.import_module("torchdoctor.tune"), "tune", study)
    assert torchdoctor.tune("mlp", budget_s=60, device="cpu", diagnose_first=False) == "result"
    [task] = bars[0].tasks
    assert seen == {"planned": 3, "at_start": 0}
    assert task.completed == 3 and task.description == "tune mlp: num_workers=2 decided"


def test_diagnose_in_a_notebook_ends_with_its_bar_full(
    monkeypatch: pytest.MonkeyPatch, bars: list[Progress], tmp_path: Path
) -> None:
    fake_ipython(monkeypatch, ZMQInteractiveShell())
    torchdoctor.diagnose(TRACE, out=tmp_path / "d")
    [task] = bars[0].tasks
    assert task.completed == task.total == 1 and task.description.startswith("diagnosed ")
