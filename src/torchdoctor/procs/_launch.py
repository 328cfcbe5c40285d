"""One run of a user's script as a process group: its process, its control connection, its
children held still between chunks, and its end (`procs/_script.py` drives it).

The script runs in its own session (process group); its tree is held still between chunks
and ended by `procs/_tree.py`.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, Listener
from typing import Any

from torchdoctor.procs._supervisor import POLL_INTERVAL_S


class Launch:
    """One run of the script: its process and, once it said hello, its control connection."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.started = time.monotonic()
        self.conn: Connection | None = None
        #: whether it reached its ready boundary
        self.ready = False


def accept(listener: Listener, watch: Callable[[], None]) -> Connection:
    """The listener's next connection; `watch` runs between polls and raises to give up (the
    script died, the deadline passed), which closes the attempt."""
    box: dict[str, Any] = {}
    done = threading.Event()
    # Read now: a `watch` that gives up closes the worker, and with it the listener, whose
    # address then no longer reads.
    address = listener.address

    def wait_for_it() -> None:
        while not done.is_set():
            try:
                box["conn"] = listener.accept()
                return
            except Exception:  # a stranger failing the authkey check, or our wake-up
                continue

    thread = threading.Thread(target=wait_for_it, daemon=True)
    thread.start()
    try:
        while True:
            thread.join(POLL_INTERVAL_S)
            if "conn" in box:
                conn: Connection = box["conn"]
                return conn
            watch()
    finally:
        if "conn" not in box:
            done.set()
            with contextlib.suppress(OSError):  # wake the accept: it fails and returns
                socket.create_connection(address, timeout=1).close()
            thread.join(1)


def wait_for(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait up to `timeout` seconds for `proc` to exit."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout)
