"""A run folder is written by one process at a time: another that would write it (a resume of
a study whose tuner still runs) is refused in one line, and a holder that dies, however it
dies, leaves the folder free."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_output import one_error_line
from torchdoctor.cli.main import main
from torchdoctor.core.errors import RecordError
from torchdoctor.core.rundir import (
    WRITING,
    finish_run_dir,
    hold_run_dir,
    new_run_dir,
    release_run_dir,
)
from torchdoctor.tune import TuneConfig

#: A process that holds `argv[1]` and says so, then waits to be killed.
HOLDER = (
    "import sys, time; from pathlib import Path; "
    "from torchdoctor.core.rundir import hold_run_dir; "
    "hold_run_dir(Path(sys.argv[1])); print('held', flush=True); time.sleep(600)"
)
#: A process that tries to hold `argv[1]` and prints what happened.
TAKER = (
    "import sys; from pathlib import Path; "
    "from torchdoctor.core.errors import RecordError; "
    "from torchdoctor.core.rundir import hold_run_dir\n"
    "try:\n    hold_run_dir(Path(sys.argv[1])); print('held')\n"
    "except RecordError as e:\n    print('refused:', e)"
)


def _holder(run: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def _try_from_another_process(run: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", TAKER, str(run)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_a_folder_being_written_is_refused_to_another_process_until_it_finishes(
    tmp_path: Path,
) -> None:
    run = new_run_dir("tune", "mlp", out=tmp_path / "run")
    hold_run_dir(run)  # again, from the process that holds it: fine
    refused = _try_from_another_process(run)
    assert refused.startswith(
        f"refused: run folder {run} is being written by process {os.getpid()};"
    )
    finish_run_dir(run)
    assert not (run / WRITING).exists()
    assert _try_from_another_process(run) == "held"


def test_a_killed_holder_leaves_the_folder_free(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    child = _holder(run)
    try:
        with pytest.raises(RecordError, match=f"process {child.pid}"):
            hold_run_dir(run)
    finally:
        child.kill()
        child.wait()
    hold_run_dir(run)
    release_run_dir(run)


def test_resuming_a_study_whose_tuner_still_runs_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = new_run_dir("tune", "mlp", out=tmp_path / "run")
    TuneConfig(workload="mlp").write(run / "tune_config.json")
    release_run_dir(run)
    child = _holder(run)
    try:
        assert main(["tune", "--resume", str(run)]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert f"is being written by process {child.pid}" in line
    finally:
        child.kill()
        child.wait()
