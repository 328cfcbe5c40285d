"""A worker leaves nothing behind: its session closed on exit, its DataLoaders started as the
parent's own process would start them (fork-made semaphores are unlinked at creation, so a
worker killed at its deadline leaves none for the resource tracker to report).
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest

from torchdoctor.procs import Exit, Prepare, Prepared, SessionSpec, _worker

CLOSED: list[str] = []


class ClosingSession:
    def __init__(self, name: str) -> None:
        self.name = name

    def run_steps(self, n: int, *, measure_phases: bool) -> list[Any]:
        return []

    def close(self) -> None:
        CLOSED.append(self.name)


def make_session(workload: str, recipe: dict[str, Any], *, device: str, seed: int) -> Any:
    return ClosingSession(workload)


def _serve(requests: list[object], start_method: str | None = None) -> list[object]:
    """Run worker_main in this process over a pipe holding `requests`; its replies."""
    parent, child = multiprocessing.Pipe()
    for request in requests:
        parent.send(request)
    _worker.worker_main(child, None, start_method)
    replies = []
    while parent.poll():
        replies.append(parent.recv())
    return replies


@pytest.mark.parametrize("end", ["exit", "parent gone"])
def test_the_worker_closes_its_session_before_it_returns(end: str) -> None:
    CLOSED.clear()
    spec = SessionSpec("held", {}, factory=f"{__name__}:make_session")
    parent, child = multiprocessing.Pipe()
    worker = threading.Thread(target=_worker.worker_main, args=(child, None))
    worker.start()
    parent.send(Prepare(spec))
    assert isinstance(parent.recv(), Prepared)
    assert CLOSED == []
    if end == "exit":
        parent.send(Exit())
    else:
        parent.close()  # the worker reads EOF: its parent went away
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert CLOSED == ["held"]


def test_the_worker_takes_the_parents_start_method(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen: list[tuple[str, bool]] = []
    monkeypatch.setattr(
        _worker.multiprocessing,
        "set_start_method",
        lambda method, force=False: chosen.append((method, force)),
    )
    assert _serve([Exit()], start_method="fork") == []
    assert chosen == [("fork", True)]


@pytest.mark.study
@pytest.mark.untimed  # asserts what stderr holds, no timing
def test_a_worker_killed_with_loader_workers_leaves_no_leaked_semaphore() -> None:
    """A worker whose DataLoader has workers, killed mid-session as a deadline kills it: the
    command's stderr holds no resource_tracker report once every process of it has ended
    (about 10 s: one worker, one loader worker)."""
    script = textwrap.dedent(
        """
        from torchdoctor.procs import Run, SessionSpec, start_worker

        if __name__ == "__main__":
            worker, _ = start_worker(
                SessionSpec("mlp", {"num_workers": 1}), isolate=True, timeout_s=120
            )
            worker.request(Run(2), timeout_s=120)
            worker.close(kill=True)
        """
    )
    # communicate() returns once the pipe's last writer (the resource tracker, the orphaned
    # loader worker) has closed it, so a late report is caught.
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    assert "resource_tracker" not in done.stderr, done.stderr
