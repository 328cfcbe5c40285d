"""`torchdoctor run -- python train.py`: the script as it is without --recipe; with --recipe and
--vs-baseline, the recipe against it in fresh process pairs. The launches are faked: what is
checked is what the command asks for and prints."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

import torchdoctor.procs as procs_mod
from cli_output import one_error_line
from torchdoctor.cli.main import main
from torchdoctor.collect import ScriptProfile
from torchdoctor.core.steps import StepTiming
from torchdoctor.tune import Confirmation
from torchdoctor.tune.config import TuneConfig
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.sources import ScriptCommand

# By their full names: on the package, `torchdoctor.diagnose` and `torchdoctor.tune` are the
# Python API's functions.
tune_mod = importlib.import_module("torchdoctor.tune")


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "train.py"
    script.write_text("print('training')\n")
    return script


def test_a_script_without_a_recipe_runs_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[dict[str, Any]] = []

    def run_script(argv: list[str], **kwargs: Any) -> ScriptProfile:
        asked.append(kwargs["recipe"])
        steps = [StepTiming(index=i, total_s=0.1, samples=8) for i in range(12)]
        return ScriptProfile(argv=argv, steps=steps)

    monkeypatch.setattr(procs_mod, "run_script", run_script)
    script = _script(tmp_path)
    code = main(["--json", "run", "--out", str(tmp_path / "r"), "--", "python", str(script)])
    assert code == 0
    assert asked == [{}]  # nothing injected
    data = json.loads(capsys.readouterr().out)
    assert data["recipe"] == {} and data["samples_per_s"] == pytest.approx(80.0)


def test_vs_baseline_without_a_recipe_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "--vs-baseline", "--", "python", str(_script(tmp_path))])
    assert code == 2
    assert "--vs-baseline needs --recipe" in one_error_line(capsys.readouterr().err)


def test_vs_baseline_prints_the_pairs_record_and_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[ScriptCommand, dict[str, Any], dict[str, Any]]] = []

    def recheck(command: ScriptCommand, recipe: dict[str, Any], **kw: Any) -> Confirmation:
        calls.append((command, recipe, kw))
        return Confirmation(
            key="run-vs-baseline:x",
            step=0,
            baseline_recipe={},
            recipe=recipe,
            status="ok",
            outcome=Outcome.MEASURED,
            samples_per_s=150.0,
            baseline_samples_per_s=100.0,
            speedup=1.5,
            speedup_ci=(1.4, 1.6),
            rates=[150.0] * 3,
            baseline_rates=[100.0] * 3,
            steps=40,
        )

    monkeypatch.setattr(tune_mod, "recheck_script", recheck)
    recipe = tmp_path / "best_recipe.json"
    recipe.write_text(json.dumps({"num_workers": 2}))
    script = _script(tmp_path)
    out = tmp_path / "r"
    code = main(
        ["--json", "run", "--recipe", str(recipe), "--vs-baseline", "--pairs", "3",
         "--out", str(out), "--", "python", str(script), "--epochs", "1"]
    )  # fmt: skip
    assert code == 0
    (command, asked, kw) = calls[0]
    assert command.argv == (str(script), "--epochs", "1") and not command.module
    assert asked == {"num_workers": 2} and kw["pairs"] == 3
    data = json.loads(capsys.readouterr().out)  # stdout: the record and nothing else
    assert data["schema"] == "torchdoctor/tune_confirmation" and data["speedup"] == 1.5
    assert json.loads((out / "vs_baseline.json").read_text())["speedup_ci"] == [1.4, 1.6]
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


def test_vs_baseline_refuses_a_torchrun_job_that_pins_its_rendezvous(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each pair runs both jobs at once: a pinned port would make them join one job.
    monkeypatch.setattr(tune_mod, "recheck_script", _never)
    recipe = tmp_path / "best_recipe.json"
    recipe.write_text(json.dumps({"bucket_cap_mb": 100}))
    code = main(
        ["run", "--recipe", str(recipe), "--vs-baseline", "--out", str(tmp_path / "r"), "--",
         "torchrun", "--nproc_per_node", "2", "--master_port", "29511", str(_script(tmp_path))]
    )  # fmt: skip
    assert code == 2
    assert "pins its rendezvous (--master_port)" in one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "r").exists()  # refused before a run folder is made


def test_vs_baseline_runs_a_torchrun_job_as_the_tuner_runs_its_arms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[ScriptCommand] = []

    def recheck(command: ScriptCommand, recipe: dict[str, Any], **kw: Any) -> Confirmation:
        calls.append(command)
        return Confirmation(
            key="run-vs-baseline:x", step=0, baseline_recipe={}, recipe=recipe, status="ok",
            outcome=Outcome.MEASURED, speedup=2.0, speedup_ci=(1.8, 2.2),
            rates=[2.0] * 3, baseline_rates=[1.0] * 3,
        )  # fmt: skip

    monkeypatch.setattr(tune_mod, "recheck_script", recheck)
    script = _script(tmp_path)
    tuned = tmp_path / "tune"  # a tune folder of the job at 2 ranks
    tuned.mkdir()
    (tuned / "best_recipe.json").write_text(json.dumps({"bucket_cap_mb": 100}))
    job = ["torch.distributed.run", "--nproc_per_node", "2", str(script)]
    TuneConfig(workload="script:train", command=job, module=True, search_batch=False).write(
        tuned / "tune_config.json"
    )
    notes = []
    for ranks in ("2", "4"):
        code = main(
            ["--json", "run", "--recipe", str(tuned), "--vs-baseline", "--out",
             str(tmp_path / ranks), "--", "torchrun", "--nproc_per_node", ranks, str(script)]
        )  # fmt: skip
        assert code == 0
        printed = capsys.readouterr()
        assert json.loads(printed.out)["speedup"] == 2.0  # stdout: the record and nothing else
        notes.append([line for line in printed.err.splitlines() if line.startswith("note:")])
    first, second = calls  # the job as a module, each arm then given its own rendezvous
    assert first.module and first.argv == tuple(job)
    assert second.argv[2] == "4"
    # Re-measured at another world size than tuned: the effective-batch note, on stderr.
    assert notes[0] == [] and len(notes[1]) == 1 and "learning rate" in notes[1][0]


def _never(*args: Any, **kwargs: Any) -> Confirmation:
    raise AssertionError("no launch expected")
