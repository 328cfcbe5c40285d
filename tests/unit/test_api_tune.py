"""`torchdoctor tune` is a shell over `torchdoctor.api.tune`: the command and the function build
the same study, resume one the same way, refuse the same cases and hold a storage URL's
password the same way. The tune stage is replaced by a recorder: no study runs."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import torchdoctor
import torchdoctor.api.tuning as tuning
import torchdoctor.cli.tune as tune_cli
from torchdoctor.api import TorchDoctorWarning, TuneProgress
from torchdoctor.cli.main import main
from torchdoctor.core.errors import UsageError

# By its full name: `torchdoctor.tune` on the package is the Python API's function.
stage = importlib.import_module("torchdoctor.tune")

PASSWORD_URL = "postgresql+psycopg://td:s3cret@db.example.org/studies"


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What each call asked of the tune stage; the diagnosis prescribes `threads`."""
    calls: list[dict[str, Any]] = []

    def study(**kwargs: Any) -> SimpleNamespace:
        calls.append(kwargs)
        return SimpleNamespace(run_dir="run")

    def diagnosed(workload: str, out: Path | None, **kw: Any) -> tuple[Path, list[str]]:
        return Path("diagnosed"), ["threads"]

    monkeypatch.setattr(stage, "tune", study)
    monkeypatch.setattr(tuning, "diagnosed_run_dir", diagnosed)
    monkeypatch.setattr(tune_cli, "finish_with_report", lambda result: None)
    return calls


class FakeStudy:
    """A shared study's storage that opens (no database server in a unit test)."""

    def __init__(self, url: Any, *, shared: bool) -> None:
        self.url = url

    def close(self) -> None:
        pass


def test_the_command_and_the_function_build_the_same_study(asked: list[dict[str, Any]]) -> None:
    argv = ["tune", "mlp", "--set", "threads=1", "--knobs", "threads, compile", "--pairs", "4"]
    assert main([*argv, "--budget", "90", "--device", "cpu", "--no-batch-search"]) == 0
    torchdoctor.tune(
        "mlp",
        recipe={"threads": 1},
        knobs=["threads", "compile"],
        pairs=4,
        budget_s=90,
        device="cpu",
        search_batch=False,
    )
    cli, api = asked
    assert cli["config"] == api["config"] and cli["out"] == api["out"] == Path("diagnosed")
    assert cli["config"].prescribed == ["threads"] and cli["config"].final_pairs == 4
    assert {"on_start", "on_trial"} <= set(cli)  # the command's progress reaches the stage


def test_the_diagnosis_is_told_to_the_progress(asked: list[dict[str, Any]]) -> None:
    told: list[list[str]] = []
    torchdoctor.tune("mlp", device="cpu", progress=TuneProgress(diagnosed=told.append))
    assert told == [["threads"]] and "on_trial" not in asked[0]


def test_resume_reaches_the_stage_with_what_is_given_again(
    asked: list[dict[str, Any]], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    assert main(["tune", "--resume", str(run), "--", "python", "train.py", "--lr", "1"]) == 0
    assert main(["tune", "--resume", str(run)]) == 0
    torchdoctor.tune(["python", "train.py", "--lr", "1"], resume=run)
    script, workload, api = asked
    assert script["resume"] == run and script["command"] == (["train.py", "--lr", "1"], False)
    assert workload["resume"] == run and workload["workload"] is None
    assert {k: v for k, v in api.items() if not k.startswith("on_")} == {
        k: v for k, v in script.items() if not k.startswith("on_")
    }


@pytest.mark.parametrize(
    ("call", "said"),
    [
        ({"resume": "run", "budget_s": 60}, "budget_s= cannot be honoured with resume="),
        ({"resume": "run", "out": "x"}, "out= cannot be honoured with resume="),
        (
            {"target": ["python", "t.py"], "params": {"rows": 8}, "search_batch": False},
            "params=, search_batch= cannot be honoured for a script",
        ),
        (
            {"target": ["python", "t.py"], "objective": "fit", "max_memory_bytes": 2**30},
            "--objective fit tunes a workload, not a script",
        ),
        ({"target": "mlp", "objective": "fit"}, "--objective fit needs the memory cap"),
        ({"target": "mlp", "objective": "speed"}, "unknown objective 'speed'"),
        ({"target": None}, "no workload to tune"),
    ],
)
def test_the_function_refuses_what_the_command_refuses(
    call: dict[str, Any], said: str, asked: list[dict[str, Any]]
) -> None:
    target = call.pop("target", None)
    with pytest.raises(UsageError, match=said.replace("(", r"\(")):
        torchdoctor.tune(target, **call)
    assert asked == []


def test_a_folder_holding_a_stored_study_is_refused_by_both(
    asked: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tune_config.json").write_text("{}")
    with pytest.raises(UsageError, match="holds a stored study"):
        torchdoctor.tune("mlp", out=tmp_path, device="cpu")
    # The command says so before --force's rule (the folder is not empty either).
    assert main(["tune", "mlp", "--out", str(tmp_path)]) == 2
    assert "holds a stored study; continue it with --resume" in capsys.readouterr().err
    assert asked == []


def test_a_password_in_the_storage_url_is_said_and_never_recorded(
    asked: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(stage, "Study", FakeStudy)
    monkeypatch.setattr(stage, "cleartext_note", lambda url: None)
    argv = ["tune", "mlp", "--storage", PASSWORD_URL, "--no-diagnose", "--device", "cpu"]
    assert main(argv) == 0
    assert "warning: the --storage URL carries a password" in capsys.readouterr().err
    with pytest.warns(TorchDoctorWarning, match="carries a password"):
        torchdoctor.tune("mlp", storage=PASSWORD_URL, diagnose_first=False, device="cpu")
    for call in asked:
        assert call["config"].storage == "postgresql+psycopg://td@db.example.org/studies"
        assert call["storage"].carries_password  # the password stays in memory
    assert asked[0]["config"] == asked[1]["config"]


def test_a_torchrun_job_is_one_study_from_the_command_and_the_function(
    asked: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("pass\n")  # the study checks its job's script exists
    job = ["torchrun", "--nproc_per_node", "2", "train.py", "--lr", "1"]
    assert main(["tune", "--budget", "90", "--", *job]) == 0
    torchdoctor.tune(job, budget_s=90)
    # With the knobs named, nothing is left for a diagnosis to order: the job is not run for one.
    assert main(["tune", "--budget", "90", "--knobs", "compile", "--", *job]) == 0
    torchdoctor.tune(job, budget_s=90, knobs=["compile"])
    cli, api, cli_named, api_named = asked
    assert cli["config"] == api["config"] and cli_named["config"] == api_named["config"]
    assert cli["config"].command == ["torch.distributed.run", *job[1:]]
    # Diagnosed first (the fixture's diagnosis prescribes threads), unless the knobs are named.
    assert cli["config"].module and cli["config"].prescribed == ["threads"]
    assert cli_named["config"].prescribed == []


def test_a_workload_file_is_resumed_as_a_workload_whatever_its_name(
    asked: list[dict[str, Any]], tmp_path: Path
) -> None:
    # `file.py:factory` names a workload even when the file's name starts with "python".
    factory = "python_models.py:make"
    assert main(["tune", "--resume", str(tmp_path), factory]) == 0
    torchdoctor.tune(factory, resume=tmp_path)
    assert [call["workload"] for call in asked] == [factory, factory]
    assert all("command" not in call for call in asked)
