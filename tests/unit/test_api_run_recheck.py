"""`torchdoctor.run` on a script and `torchdoctor.recheck` (`run --recipe R --vs-baseline`):
what they ask of the stages, the records they return and the run folders they write. The
launches are faked but one: a short real script run."""

from __future__ import annotations

import importlib
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import torchdoctor
import torchdoctor.procs as procs_mod
from torchdoctor.api import TorchDoctorWarning
from torchdoctor.collect import ScriptProfile, ScriptRun
from torchdoctor.core.defaults import DEFAULT_REPLICATES
from torchdoctor.core.errors import KnobError, TuneError, UsageError
from torchdoctor.core.steps import StepTiming
from torchdoctor.tune import Confirmation, TuneConfig
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.sources import ScriptCommand

# By its full name: on the package, `torchdoctor.tune` is the Python API's function.
tune_mod = importlib.import_module("torchdoctor.tune")


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "train.py"
    script.write_text("print('training')\n")
    return script


def _tuned(tmp_path: Path, recipe: dict[str, Any], job: list[str] | None = None) -> Path:
    """A tune run folder: its best recipe and, for a torchrun job, the study's command."""
    folder = tmp_path / "tune"
    folder.mkdir()
    (folder / "best_recipe.json").write_text(json.dumps(recipe))
    if job is not None:
        config = TuneConfig(workload="script:train", command=job, module=True, search_batch=False)
        config.write(folder / "tune_config.json")
    return folder


def _confirmation(recipe: dict[str, Any], *, ok: bool = True) -> Confirmation:
    if not ok:
        return Confirmation(
            key="run-vs-baseline:x", step=0, baseline_recipe={}, recipe=recipe,
            status="crash", outcome=Outcome.CRASHED, reason="the baseline crashed",
        )  # fmt: skip
    return Confirmation(
        key="run-vs-baseline:x", step=0, baseline_recipe={}, recipe=recipe, status="ok",
        outcome=Outcome.MEASURED, speedup=1.5, speedup_ci=(1.4, 1.6),
        rates=[1.5] * 3, baseline_rates=[1.0] * 3,
    )  # fmt: skip


def _fake_launch(
    monkeypatch: pytest.MonkeyPatch, exit_code: int | None = 0
) -> list[tuple[list[str], dict[str, Any]]]:
    asked: list[tuple[list[str], dict[str, Any]]] = []

    def run_script(argv: list[str], **kwargs: Any) -> ScriptProfile:
        asked.append((argv, kwargs))
        steps = [StepTiming(index=i, total_s=0.1, samples=8) for i in range(12)]
        return ScriptProfile(argv=argv, steps=steps, exit_code=exit_code)

    monkeypatch.setattr(procs_mod, "run_script", run_script)
    return asked


def _status(run_dir: Path) -> str:
    return str(json.loads((run_dir / "run.json").read_text())["status"])


def test_run_takes_a_script_with_a_recipe_file_and_writes_its_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _fake_launch(monkeypatch)
    script = _script(tmp_path)
    out = tmp_path / "run"
    recipe = _tuned(tmp_path, {"num_workers": 2}) / "best_recipe.json"
    result = torchdoctor.run(
        ["python", str(script), "--epochs", "1"], recipe=recipe, steps=12, warmup=2, out=out
    )
    assert isinstance(result, ScriptRun)
    ((argv, kwargs),) = asked
    assert argv == [str(script), "--epochs", "1"] and not kwargs["module"]
    assert kwargs["recipe"] == {"num_workers": 2} and kwargs["steps"] == 12
    assert kwargs["out_dir"] == out / "collect" and not kwargs["stdout_to_stderr"]
    assert result.samples_per_s == pytest.approx(80.0)  # 8 samples in 0.1 s
    assert ScriptRun.read(out / "script_run.json").recipe == {"num_workers": 2}
    assert _status(out) == "complete"


def test_a_script_that_fails_is_recorded_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_launch(monkeypatch, exit_code=3)
    out = tmp_path / "run"
    result = torchdoctor.run(f"python {_script(tmp_path)}", recipe={"num_workers": 1}, out=out)
    assert isinstance(result, ScriptRun) and result.exit_code == 3
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["status"] == "failed" and "exited with code 3" in manifest["error"]


@pytest.mark.parametrize(
    ("keywords", "said"),
    [
        ({"device": "cpu"}, "device="),
        ({"params": {"rows": 8}}, "params="),
        ({"measure_phases": False}, "measure_phases="),
    ],
)
def test_a_workloads_keyword_given_for_a_script_is_refused_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keywords: dict[str, Any], said: str
) -> None:
    asked = _fake_launch(monkeypatch)
    out = tmp_path / "run"
    with pytest.raises(UsageError, match=f"{said} cannot be honoured for a script"):
        torchdoctor.run(["python", str(_script(tmp_path))], out=out, **keywords)
    assert asked == [] and not out.exists()


def test_a_workloads_run_refuses_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="out= cannot be honoured for a workload's run"):
        torchdoctor.run("mlp", out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_bad_recipe_file_is_refused_before_a_script_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _fake_launch(monkeypatch)
    bad = tmp_path / "bad.json"
    bad.write_text('{"num_workers": -1}')
    out = tmp_path / "run"
    with pytest.raises(KnobError, match="invalid value -1"):
        torchdoctor.run(["python", str(_script(tmp_path))], recipe=bad, out=out)
    assert asked == [] and not out.exists()


def test_recheck_a_workload_in_fresh_pairs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, dict[str, Any], dict[str, Any]]] = []

    def recheck(workload: str, recipe: dict[str, Any], **kw: Any) -> Confirmation:
        asked.append((workload, recipe, kw))
        return _confirmation(recipe)

    monkeypatch.setattr(tune_mod, "recheck_workload", recheck)
    out = tmp_path / "ab"
    check = torchdoctor.recheck("mlp", recipe={"threads": 1}, device="cpu", out=out)
    ((workload, recipe, kw),) = asked
    assert workload == "mlp" and recipe == {"threads": 1}
    assert kw["pairs"] == DEFAULT_REPLICATES and kw["device"] == "cpu" and kw["seed"] == 0
    assert kw["log_dir"] == out / "logs" and kw["log_dir"].is_dir()
    assert check.speedup == 1.5 and check.speedup_ci == (1.4, 1.6)
    assert Confirmation.read(out / "vs_baseline.json").speedup_ci == (1.4, 1.6)
    assert _status(out) == "complete"


def test_recheck_a_script_with_a_tune_folders_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[ScriptCommand, dict[str, Any], dict[str, Any]]] = []

    def recheck(command: ScriptCommand, recipe: dict[str, Any], **kw: Any) -> Confirmation:
        calls.append((command, recipe, kw))
        return _confirmation(recipe)

    monkeypatch.setattr(tune_mod, "recheck_script", recheck)
    script = _script(tmp_path)
    out = tmp_path / "ab"
    tuned = _tuned(tmp_path, {"num_workers": 2})
    check = torchdoctor.recheck(["python", str(script)], recipe=str(tuned), pairs=3, out=out)
    ((command, recipe, kw),) = calls
    assert command.argv == (str(script),) and not command.module
    assert recipe == {"num_workers": 2} and kw["pairs"] == 3
    assert check.ok and _status(out) == "complete"


def test_recheck_without_an_interval_returns_the_record_and_marks_the_folder_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tune_mod, "recheck_script", lambda c, r, **kw: _confirmation(r, ok=False))
    out = tmp_path / "ab"
    check = torchdoctor.recheck(str(_script(tmp_path)), recipe={"num_workers": 2}, out=out)
    assert not check.ok and check.reason == "the baseline crashed"
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["status"] == "failed" and manifest["error"] == "the baseline crashed"


def test_recheck_a_torchrun_job_tuned_at_another_world_size_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[ScriptCommand] = []

    def recheck(command: ScriptCommand, recipe: dict[str, Any], **kw: Any) -> Confirmation:
        calls.append(command)
        return _confirmation(recipe)

    monkeypatch.setattr(tune_mod, "recheck_script", recheck)
    script = _script(tmp_path)
    job = ["torch.distributed.run", "--nproc_per_node", "2", str(script)]
    tuned = _tuned(tmp_path, {"bucket_cap_mb": 100}, job=job)
    with warnings.catch_warnings():
        warnings.simplefilter(
            "error", TorchDoctorWarning
        )  # the world size it was tuned at: nothing to say
        torchdoctor.recheck(["torchrun", "--nproc_per_node", "2", str(script)], recipe=tuned,
                            out=tmp_path / "2")  # fmt: skip
    with pytest.warns(TorchDoctorWarning, match="learning rate"):
        torchdoctor.recheck(["torchrun", "--nproc_per_node", "4", str(script)], recipe=tuned,
                            out=tmp_path / "4")  # fmt: skip
    first, second = calls
    assert first.module and first.argv == tuple(job) and second.argv[2] == "4"


@pytest.mark.parametrize(
    ("job", "keywords", "error", "said"),
    [
        (
            ["torchrun", "--nproc_per_node", "2", "--master_port", "29511"],
            {},
            TuneError,
            "pins its rendezvous",
        ),
        (["python"], {"device": "cpu"}, UsageError, "device= cannot be honoured for a script"),
        (["python", "missing.py"], {}, UsageError, "script 'missing.py' not found"),
    ],
)
def test_recheck_refuses_what_it_cannot_run_before_a_folder_is_made(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    job: list[str],
    keywords: dict[str, Any],
    error: type[Exception],
    said: str,
) -> None:
    monkeypatch.setattr(tune_mod, "recheck_script", _never)
    monkeypatch.chdir(tmp_path)
    script = [] if job[-1] == "missing.py" else [str(_script(tmp_path))]
    with pytest.raises(error, match=said):
        torchdoctor.recheck([*job, *script], recipe={"num_workers": 2}, out=tmp_path / "ab",
                            **keywords)  # fmt: skip
    assert not (tmp_path / "ab").exists()


def _never(*args: Any, **kwargs: Any) -> Confirmation:
    raise AssertionError("no launch expected")


def test_run_a_real_script_as_it_is(tmp_path: Path) -> None:
    # One real launch: a few steps of a tiny model, the script's own loop unmodified.
    script = tmp_path / "tiny.py"
    script.write_text(
        "import torch\n"
        "model = torch.nn.Linear(4, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(8):\n"
        "    x = torch.randn(16, 4)\n"
        "    loss = model(x).pow(2).mean()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    out = tmp_path / "run"
    result = torchdoctor.run([sys.executable, str(script)], warmup=1, out=out)
    assert isinstance(result, ScriptRun) and result.exit_code == 0
    assert result.steps == 8 and result.recipe == {}
    assert result.step_s_median is not None and result.step_s_median > 0
    assert ScriptRun.read(out / "script_run.json").steps == 8 and _status(out) == "complete"
