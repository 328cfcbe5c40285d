"""A tuner that is stopped leaves nothing running, and a run folder that says so.

- SIGKILL of `tune -- python train.py` while an arm is paused (its DataLoader workers stopped):
  the script dies with its tuner (PR_SET_PDEATHSIG) and continues its stopped workers first,
  so the whole tree exits; before, the script was left under init, waiting for ever on a
  stopped worker.
- SIGTERM of the same: the tuner unwinds as after Ctrl-C, ends every tree it started, marks
  the run folder "interrupted" and exits 143.
- Ctrl-C (SIGINT to the foreground process group) during `tune mlp`: exit 130, "interrupted",
  and a run folder with its report that `tune --resume` continues.
- SIGTERM of `diagnose -- python train.py`: its script and the script's DataLoader workers are
  ended, the command says "interrupted by SIGTERM" and exits 143, its folder "interrupted".

Each drives the real CLI in a session of its own and walks its process tree with psutil.
They wait for a tuner to reach its arms (tens of seconds on a busy 2-core host): `slow`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

# Each test starts a tuner or a diagnosis and kills it: process-launching checks of behaviour,
# no timing, in the untimed studies so that the fast tier stays fast.
pytestmark = [pytest.mark.slow, pytest.mark.study, pytest.mark.untimed]

#: Seconds a tuner may take to reach the state a test interrupts it in (a loaded 2-core host
#: took 48 s to pause a script arm's first chunk).
REACH_TIMEOUT_S = 240.0
#: Seconds the processes of a stopped tuner may take to be gone (a script unwinds, its
#: DataLoader joins its workers; the launcher's grace is 10 s).
GONE_TIMEOUT_S = 60.0

# A script whose DataLoader has two workers, training for as long as it is driven.
TINY_LOADER = """
import torch
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
loader = DataLoader(data, batch_size=16, num_workers=2, persistent_workers=True)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(100000):
    for x, y in loader:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
"""


def _start(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    """The CLI in a session of its own (a signal to its group reaches nothing of the test's)."""
    return subprocess.Popen(
        [sys.executable, "-m", "torchdoctor", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _wait_for(
    proc: subprocess.Popen[bytes], seen: dict[int, psutil.Process], ready: Callable[[], bool]
) -> None:
    """Poll until `ready()`, recording every process under `proc` into `seen`."""
    deadline = time.monotonic() + REACH_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(proc.pid).children(recursive=True):
                seen.setdefault(child.pid, child)
        if ready():
            return
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the command ended first ({proc.returncode}): {err.decode()[-2000:]}")
        time.sleep(0.2)
    _end(proc, seen)
    pytest.fail("the command did not reach the state to interrupt in time")


def _stopped_script_children(seen: dict[int, psutil.Process]) -> bool:
    """Whether some process under a driven script is stopped (a paused arm's loader worker)."""
    for process in seen.values():
        with contextlib.suppress(psutil.Error):
            if process.status() == psutil.STATUS_STOPPED:
                return True
    return False


def _left(seen: dict[int, psutil.Process]) -> list[str]:
    """Those of `seen` still running, after a bounded wait."""
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while True:
        left = []
        for process in seen.values():
            with contextlib.suppress(psutil.Error):
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    left.append(f"{process.pid} {process.status()} {process.ppid()}")
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _end(proc: subprocess.Popen[bytes], seen: dict[int, psutil.Process]) -> None:
    """Leave nothing behind whatever the test found (its own cleanup, not what it checks)."""
    for process in (
        [psutil.Process(proc.pid), *seen.values()] if proc.poll() is None else seen.values()
    ):
        with contextlib.suppress(psutil.Error):
            process.resume()
            process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=10)


def _status(run_dir: Path) -> str:
    return str(json.loads((run_dir / "run.json").read_text())["status"])


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_a_killed_tuner_leaves_no_process_behind(tmp_path: Path, sig: signal.Signals) -> None:
    (tmp_path / "train.py").write_text(TINY_LOADER)
    run_dir = tmp_path / "run"
    proc = _start(
        ["tune", "--budget", "300s", "--out", str(run_dir), "--", "python", "train.py"], tmp_path
    )
    seen: dict[int, psutil.Process] = {}
    try:
        _wait_for(proc, seen, lambda: _stopped_script_children(seen))
        os.kill(proc.pid, sig)
        proc.communicate(timeout=GONE_TIMEOUT_S)
        assert _left(seen) == []
    finally:
        _end(proc, seen)
    if sig == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM
        assert _status(run_dir) == "interrupted"
    else:
        assert proc.returncode == -signal.SIGKILL


def test_ctrl_c_during_tune_says_interrupted_and_leaves_a_report(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = ["tune", "mlp", "--budget", "300s", "--no-diagnose", "--out", str(run_dir)]
    proc = _start(args, tmp_path)
    seen: dict[int, psutil.Process] = {}
    logs = run_dir / "logs"
    try:
        # An arm is running: its worker has written its log.
        _wait_for(proc, seen, lambda: logs.is_dir() and any(logs.iterdir()))
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: the whole foreground group
        _, err = proc.communicate(timeout=GONE_TIMEOUT_S)
        assert _left(seen) == []
    finally:
        _end(proc, seen)
    text = err.decode()
    assert proc.returncode == 130, text[-2000:]
    assert "interrupted" in text
    assert "budget ran out" not in text
    assert _status(run_dir) == "interrupted"
    assert (run_dir / "report.md").is_file()
    assert "tune --resume run" in " ".join(text.split())  # the folder, as seen from its cwd


def test_a_sigtermed_diagnose_ends_its_script_and_says_interrupted(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TINY_LOADER)
    run_dir = tmp_path / "run"
    proc = _start(["diagnose", "--out", str(run_dir), "--", "python", "train.py"], tmp_path)
    seen: dict[int, psutil.Process] = {}
    try:
        # The script and its two DataLoader workers are running.
        _wait_for(proc, seen, lambda: len(seen) >= 3)
        os.kill(proc.pid, signal.SIGTERM)  # the command only, as `kill` or a scheduler sends it
        _, err = proc.communicate(timeout=GONE_TIMEOUT_S)
        assert _left(seen) == []
    finally:
        _end(proc, seen)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "interrupted by SIGTERM" in err.decode()
    assert _status(run_dir) == "interrupted"
