"""`torchdoctor report` end to end, in-process: outputs, formats and bad input."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from torchdoctor.cli.main import main


def _sample_run() -> ModuleType:
    path = Path(__file__).parents[1] / "unit" / "report" / "report_samples.py"
    spec = importlib.util.spec_from_file_location("report_sample_run", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return _sample_run().make_run(tmp_path)


def test_default_html_into_the_run_folder(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(run_dir)]) == 0
    out = capsys.readouterr().out.strip()
    assert Path(out).resolve() == (run_dir / "report.html").resolve()
    assert (run_dir / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_markdown_to_a_chosen_file_and_json_output(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "pr-comment.md"
    assert main(["report", str(run_dir), "--format", "md", "-o", str(target)]) == 0
    assert target.read_text().startswith("# torchdoctor demo")
    capsys.readouterr()
    assert main(["--json", "report", str(run_dir), "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["format"] == "json" and printed["bytes"] > 0
    bundle = json.loads(Path(printed["report"]).read_text())
    assert bundle["schema"] == "torchdoctor/report_bundle"


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "no such run folder or record file"),
        ("not_run_dir", "not a torchdoctor run folder"),
        ("bad_version", "version 42 is not supported"),
        ("bad_format", "unknown report format 'pdf'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str, message: str
) -> None:
    args = ["report", str(run_dir)]
    if setup == "missing":
        args = ["report", str(tmp_path / "nope")]
    elif setup == "not_run_dir":
        (tmp_path / "empty").mkdir()
        args = ["report", str(tmp_path / "empty")]
    elif setup == "bad_version":
        path = run_dir / "diagnosis.json"
        data = json.loads(path.read_text())
        data["version"] = 42
        path.write_text(json.dumps(data))
    else:
        args += ["--format", "pdf"]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and err.startswith("error:") and "Traceback" not in err
    assert not (run_dir / "report.html").exists()


def test_killed_run_renders_a_report_that_says_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _sample_run().make_run(tmp_path, complete=False)
    assert main(["report", str(run_dir), "--format", "md"]) == 0
    text = (run_dir / "report.md").read_text()
    assert "Status: **running**" in text and "## What is missing" in text
    assert "tune.json" in text
