"""An interrupted command says so: Ctrl-C, SIGTERM and SIGHUP end it with one line and exit
128 + the signal's number, naming the run folder its stage marked "interrupted"."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from torchdoctor.cli import main as cli_main
from torchdoctor.core.rundir import marking_interruption, new_run_dir


def _lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def test_ctrl_c_in_a_command_is_interrupted_exit_130(capsys: pytest.CaptureFixture[str]) -> None:
    @cli_main.app.command("_ctrl_c_for_test", hidden=True)
    def _ctrl_c() -> None:
        raise KeyboardInterrupt

    code = cli_main.main(["_ctrl_c_for_test"])
    assert code == 130
    assert _lines(capsys.readouterr().err) == ["error: interrupted"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_a_signal_unwinds_the_command_and_marks_its_run_folder(
    sig: signal.Signals, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / f"run-{sig.name}"
    unwound: list[str] = []

    @cli_main.app.command(f"_signal_{sig.name.lower()}_for_test", hidden=True)
    def _signalled() -> None:
        folder = new_run_dir("diagnose", "train.py", out=run_dir)
        with marking_interruption(folder):
            try:
                os.kill(os.getpid(), sig)
                time.sleep(30)  # the handler raises here, at once
            finally:
                unwound.append("finally")

    before = signal.getsignal(sig)
    code = cli_main.main([f"_signal_{sig.name.lower()}_for_test"])
    assert code == 128 + sig
    assert unwound == ["finally"]  # the command unwound: its cleanup ran
    assert signal.getsignal(sig) == before  # the handler is the command's only
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["error"] == f"interrupted by {sig.name}"
    (line,) = _lines(capsys.readouterr().err)
    assert line.startswith(f"error: interrupted by {sig.name}; what was done is in ")
    assert line.endswith(str(run_dir.name))
