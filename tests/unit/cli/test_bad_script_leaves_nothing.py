"""A script that cannot start, or a knob to try that does not exist, is one line and exit 2
before any run folder exists, for every command that takes a script after `--`."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.cli import main as cli_main


@pytest.mark.parametrize("command", ["diagnose", "run", "memory", "tune"])
@pytest.mark.parametrize(
    ("script", "says"),
    [
        (None, "script 'missing.py' not found"),
        ("def broken(:\n", "has a syntax error at line 1"),
    ],
    ids=["missing", "syntax-error"],
)
def test_a_script_that_cannot_start_leaves_no_run_folder(
    command: str,
    script: str | None,
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    if script is not None:
        (tmp_path / "missing.py").write_text(script)
    out = tmp_path / "run"
    assert cli_main.main([command, "--out", str(out), "--", "python", "missing.py"]) == 2
    err = capsys.readouterr().err
    assert says in err
    assert "Traceback" not in err
    assert not out.exists()


def test_an_unknown_knob_to_try_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["tune", "mlp", "--knobs", "threads,no_such_knob", "--device", "cpu"]
    assert cli_main.main(argv) == 2
    assert "unknown knob 'no_such_knob'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
