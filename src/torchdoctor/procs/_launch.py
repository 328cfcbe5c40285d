"""One run of a user's script as a process group: its process, its control connection, its
children held still between chunks, and its end (`procs/_script.py` drives it).

The script runs in its own session (process group); its tree is held still between chunks
and ended by `procs/_tree.py`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, Listener
from typing import Any, Final

from torchdoctor.procs._supervisor import POLL_INTERVAL_S


class Launch:
    """One run of the script: its process and, once it said hello, its control connection."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.started = time.monotonic()
        self.conn: Connection | None = None
        #: whether it reached its ready boundary
        self.ready = False


#: Seconds an accepted connection has to pass the authkey handshake (two messages of under
#: 100 bytes each way on loopback, which the script's `collect.control` sends at once) before
#: it is dropped: a peer that connects and says nothing (anyone on the machine can reach a
#: loopback port) would otherwise hold the accept, and the script's real connection behind
#: it, until the deadline. Generous for a script busy importing on a loaded 2-core machine.
HANDSHAKE_TIMEOUT_S: Final = 10.0


def _timeval(seconds: float) -> bytes:
    whole = int(seconds)
    return struct.pack("ll", whole, int((seconds - whole) * 1e6))


def _handshake(conn: Connection, authkey: bytes) -> bool:
    """Whether `conn` passes multiprocessing's authkey challenge both ways (what
    `Listener.accept` does) within `HANDSHAKE_TIMEOUT_S`; a peer that fails is closed."""
    from multiprocessing.connection import (
        answer_challenge,
        deliver_challenge,
    )

    # The timeout lives on the socket (SO_RCVTIMEO), which a duplicate descriptor shares: a
    # silent peer's read then fails with EAGAIN instead of blocking.
    with socket.socket(fileno=os.dup(conn.fileno())) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(HANDSHAKE_TIMEOUT_S))
        try:
            deliver_challenge(conn, authkey)
            answer_challenge(conn, authkey)
        except Exception:  # a stranger: a wrong key, garbage, silence, a hang-up
            conn.close()
            return False
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(0))
    return True


def accept(listener: Listener, watch: Callable[[], None]) -> Connection:
    """The listener's next authenticated connection; `watch` runs between polls and raises to
    give up (the script died, the deadline passed), which closes the attempt.

    Each accepted connection passes its handshake in a thread of its own, with a timeout, so
    that a stranger who connects and stays silent neither blocks the script's own connection
    nor the accepting of others.
    """
    box: dict[str, Any] = {}
    done = threading.Event()
    won = threading.Event()
    lock = threading.Lock()
    # Read now: a `watch` that gives up closes the worker, and with it the listener, whose
    # address then no longer reads. The raw socket listener and the key are the ones
    # `Listener.accept` itself uses.
    address = listener.address
    raw = listener._listener  # type: ignore[attr-defined]
    authkey: bytes = listener._authkey  # type: ignore[attr-defined]

    def check(conn: Connection) -> None:
        if not done.is_set() and _handshake(conn, authkey):
            with lock:
                if not done.is_set():
                    box["conn"] = conn
                    done.set()
                    won.set()
                    return
        conn.close()

    def wait_for_it() -> None:
        while not done.is_set():
            try:
                conn = raw.accept()
            except Exception:  # the listener closed, or our wake-up
                continue
            if done.is_set():
                conn.close()
                return
            threading.Thread(target=check, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=wait_for_it, daemon=True)
    thread.start()
    try:
        while True:
            won.wait(POLL_INTERVAL_S)
            with lock:
                if "conn" in box:
                    conn: Connection = box["conn"]
                    return conn
            watch()
    finally:
        with lock:
            done.set()
        with contextlib.suppress(OSError):  # wake the accept: it closes this one and returns
            socket.create_connection(address, timeout=1).close()
        thread.join(1)


def wait_for(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait up to `timeout` seconds for `proc` to exit."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout)
