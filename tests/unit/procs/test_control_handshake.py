"""A stranger on the control channel's port: neither a silent connection nor a wrong key
holds up the script's own connection."""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading
from multiprocessing.connection import Client, Connection, Listener

import pytest

from torchdoctor.procs import _launch


class _GaveUp(Exception):
    pass


def _patience(polls: int) -> object:
    """A `watch` that gives up after `polls` polls (the script's deadline, in the worker)."""
    count = [0]

    def watch() -> None:
        count[0] += 1
        if count[0] > polls:
            raise _GaveUp

    return watch


def test_a_silent_stranger_does_not_stall_the_real_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A handshake timeout far past the test's patience: the real client must get through
    # while the stranger is still connected and silent, not after the stranger is dropped.
    monkeypatch.setattr(_launch, "HANDSHAKE_TIMEOUT_S", 3600.0)
    key = secrets.token_bytes(32)
    with Listener(("127.0.0.1", 0), authkey=key) as listener:
        silent = socket.create_connection(listener.address)
        wrong = threading.Thread(target=_wrong_key, args=(listener.address,), daemon=True)
        wrong.start()
        box: dict[str, Connection] = {}
        client = threading.Thread(
            target=lambda: box.setdefault("c", Client(listener.address, authkey=key)),
            daemon=True,
        )
        client.start()
        conn = _launch.accept(listener, _patience(polls=600))  # type: ignore[arg-type]
        client.join(30)
        box["c"].send("hello")
        assert conn.recv() == "hello"
        conn.close()
        box["c"].close()
        silent.close()


def _wrong_key(address: tuple[str, int]) -> None:
    with contextlib.suppress(Exception):  # refused, as it should be
        Client(address, authkey=b"not the key").close()


def test_a_silent_stranger_is_dropped_after_the_handshake_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_launch, "HANDSHAKE_TIMEOUT_S", 0.2)
    with Listener(("127.0.0.1", 0), authkey=b"k" * 32) as listener:
        silent = socket.create_connection(listener.address)
        silent.settimeout(30)
        with pytest.raises(_GaveUp):
            _launch.accept(listener, _patience(polls=20))  # type: ignore[arg-type]
        received = b""
        while chunk := silent.recv(4096):  # the challenge, then the end of the connection
            received += chunk
        assert b"#CHALLENGE#" in received
        silent.close()
