"""Bad input to `torchdoctor diagnose -- ...`: clear message, a failing script exit 3 (its own
code in the message), whatever was measured still written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from torchdoctor.cli.main import main


def _run(tmp_path: Path, script: str, *args: str) -> tuple[int, Path]:
    out = tmp_path / "run"
    path = tmp_path / "script.py"
    path.write_text(script)
    code = main(
        [
            "diagnose",
            "--profile-steps",
            "0",
            "--out",
            str(out),
            "--",
            sys.executable,
            str(path),
            *args,
        ]
    )
    return code, out


def test_missing_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["diagnose", "--out", str(tmp_path / "r"), "--", sys.executable, "nope.py"])
    assert code == 2
    assert "nope.py" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()  # bad input, said before any run folder exists


def test_syntax_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _run(tmp_path, "def broken(:\n")
    assert code == 2
    assert "syntax error" in capsys.readouterr().err


def test_raises_before_first_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(tmp_path, "raise RuntimeError('boom before training')\n")
    assert code == 3  # the script failed (Python's own code for an uncaught exception is 1)
    err = capsys.readouterr().err
    assert "first training step" in err and "code 1" in err
    assert json.loads((out / "run.json").read_text())["status"] == "failed"
    assert (out / "profile.json").is_file()


def test_never_trains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(tmp_path, "import torch\nprint(torch.ones(2).sum())\n")
    assert code == 2
    assert "without a training step" in capsys.readouterr().err
    assert (out / "profile.json").is_file()


def test_a_failing_script_exits_3_and_says_its_own_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = (
        "import sys, torch\n"
        "m = torch.nn.Linear(4, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(4):\n"
        "    opt.zero_grad(); m(torch.randn(8, 4)).sum().backward(); opt.step()\n"
        "sys.exit(2)\n"
    )
    code, out = _run(tmp_path, script)
    assert code == 3  # the script's own 2 is not passed through: it would read as bad usage
    assert "code 2" in capsys.readouterr().err
    assert (out / "diagnosis.json").is_file()
    assert json.loads((out / "diagnosis.json").read_text())["step_count"] == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no_such_trace.json"], "no such trace file or folder: no_such_trace.json"),
        (["traces/missing.json.gz"], "no such trace file or folder"),
        (["no_such_workload"], "unknown workload 'no_such_workload'"),
        (["cnn", "--set", "no_such_knob=1"], "unknown knob 'no_such_knob'"),
    ],
)
def test_bad_target_says_what_and_leaves_no_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    out = tmp_path / "run"
    code = main(["diagnose", *args, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert not out.exists()
