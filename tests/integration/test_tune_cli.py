"""`torchdoctor tune` end to end on CPU (a real workload, a small budget, one knob)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchdoctor.cli.main import main
from torchdoctor.tune.records import read_trial


@pytest.mark.study
@pytest.mark.untimed  # the run folder, the JSON and the trial tried, whatever its verdict
def test_tune_mlp_writes_the_run_folder_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    code = main(
        # A generous budget: the study ends when its one knob is tried, not at the budget.
        # --no-diagnose and --no-batch-search keep this test to two worker processes and one
        # A/B; the diagnosis and the batch search have their own tests.
        [
            "--json",
            "tune",
            "mlp",
            "--budget",
            "10m",
            "--knobs",
            "set_to_none",
            "--no-diagnose",
            "--no-batch-search",
            # One thread: on a shared 2-core host a two-thread baseline waits on OpenMP
            # barriers whenever another process holds a core (30-150 s instead of 10).
            "--set",
            "threads=1",
            "--out",
            str(run),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    data = json.loads(captured.out)
    for key in ("baseline_samples_per_s", "best_samples_per_s", "speedup", "best_recipe", "ladder"):
        assert key in data
    assert data["baseline_samples_per_s"] > 0
    assert data["ladder"]["rungs"][0]["verdict"] == "baseline"
    names = {p.name for p in run.iterdir()}
    assert {"tune.json", "best_recipe.json", "best_recipe.py", "study.db", "trials"} <= names
    trials = [read_trial(p) for p in sorted((run / "trials").iterdir())]
    assert trials[0].kind == "baseline" and trials[0].ok
    assert [t.change for t in trials if t.kind == "ladder"] == [{"set_to_none": False}]
    snippet = (run / "best_recipe.py").read_text()
    compile(snippet, "best_recipe.py", "exec")  # it really is ready-to-paste Python
    assert json.loads((run / "run.json").read_text())["status"] == "complete"
    # The report is rendered at the end and its path printed (stderr: stdout holds the JSON),
    # folded at the console's width where the run folder's path is long (pytest-xdist's
    # folders are).
    assert {"report.html", "report.md"} <= {p.name for p in run.iterdir()}
    printed = captured.err.replace("\n", "")
    assert str(run / "report.html") in printed and str(run / "report.md") in printed
    assert not [t for t in trials if t.kind == "batch"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tune", "no-such-model"], "no-such-model"),
        (["tune", "mlp", "--budget", "soon"], "--budget soon: not a duration"),
        (["tune", "mlp", "--max-memory", "lots"], "cannot read memory size 'lots'"),
        (["tune", "mlp", "--objective", "speed"], "unknown objective 'speed'"),
        (["tune", "mlp", "--set", "compile=fast"], "compile"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main([*args, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_unopenable_storage_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/no/such/dir/study.db"
    code = main(["tune", "mlp", "--storage", url, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "cannot open the study storage" in err
    assert not (tmp_path / "run").exists()


def test_demo_rejects_a_bad_budget(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["demo", "--budget", "whenever", "--out", str(tmp_path / "run")])
    assert code == 2
    assert "--budget whenever: not a duration" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
