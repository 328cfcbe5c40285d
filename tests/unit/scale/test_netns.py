"""Two hosts on one machine: a shaped link between two namespaces, always cleaned up."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from torchdoctor.core.errors import ScaleError
from torchdoctor.scale.netns import (
    TBF_MIN_BURST_PACKETS,
    _burst_bytes,
    shaped_loopback,
    two_hosts,
    unavailable,
)

WHY = unavailable()
needs_namespaces = pytest.mark.skipif(WHY is not None, reason=f"no network namespaces here: {WHY}")

#: 8 Mbit/s carries 100 kB in 0.1 s: long enough to see the shaping, short for a test.
RATE_MBIT = 8.0
PAYLOAD = 100_000

_RECEIVE = """
import socket, sys, time
s = socket.socket(); s.bind(("0.0.0.0", 5123)); s.listen(); print("ready", flush=True)
c, _ = s.accept(); n = 0; start = None
while True:
    d = c.recv(65536)
    if not d: break
    start = start or time.perf_counter(); n += len(d)
print(n, time.perf_counter() - start, flush=True)
"""
_SEND = "import socket, sys; s = socket.create_connection((sys.argv[1], 5123)); "
_SEND += f"s.sendall(b'x' * {PAYLOAD}); s.close()"


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


@needs_namespaces
def test_the_link_carries_at_the_rate_and_the_namespaces_go_away() -> None:
    before = _namespaces()
    with two_hosts(rate_mbit=RATE_MBIT) as hosts:
        assert set(hosts.names) <= _namespaces()
        receiver = subprocess.Popen(
            [*hosts.exec_prefix(1), sys.executable, "-c", _RECEIVE],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert receiver.stdout is not None
        assert receiver.stdout.readline().strip() == "ready"
        subprocess.run(
            [*hosts.exec_prefix(0), sys.executable, "-c", _SEND, hosts.addresses[1]], check=True
        )
        received, seconds = receiver.communicate(timeout=30)[0].split()
    assert int(received) == PAYLOAD
    # a shaped link cannot be faster than its rate (less its bucket); a busy host only slows it
    assert float(seconds) > 0.5 * PAYLOAD * 8 / (RATE_MBIT * 1e6)
    assert _namespaces() == before


@needs_namespaces
def test_namespaces_are_removed_when_the_body_fails() -> None:
    before = _namespaces()
    with pytest.raises(ScaleError), two_hosts() as hosts:
        assert set(hosts.names) <= _namespaces()
        raise ScaleError("the job failed")
    assert _namespaces() == before


_HOLD = """
import sys, time
from torchdoctor.scale.netns import two_hosts
with two_hosts() as hosts:
    print(*hosts.names, flush=True)
    time.sleep(60)
"""


@needs_namespaces
def test_namespaces_are_removed_when_the_process_is_terminated() -> None:
    # `timeout`, a scheduler or `kill` ends a long benchmark with SIGTERM.
    holder = subprocess.Popen([sys.executable, "-c", _HOLD], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    names = set(holder.stdout.readline().split())
    assert len(names) == 2 and names <= _namespaces()
    holder.terminate()
    assert holder.wait(timeout=30) == 128 + 15  # SystemExit(128 + SIGTERM), after the cleanup
    assert not names & _namespaces()


def _inside(name: str) -> list[psutil.Process]:
    out = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout
    return [psutil.Process(int(pid)) for pid in out.split() if psutil.pid_exists(int(pid))]


def _gone(p: psutil.Process) -> bool:
    try:
        return p.status() == psutil.STATUS_ZOMBIE  # ended, not yet reaped by its new parent
    except psutil.NoSuchProcess:
        return True


@needs_namespaces
def test_processes_left_inside_are_ended_with_the_namespaces() -> None:
    # a rank in a session of its own (as torchrun starts them), still running at the exit
    with two_hosts() as hosts:
        subprocess.run([*hosts.exec_prefix(1), "setsid", "--fork", "sleep", "60"], check=True)
        for _ in range(100):  # until the forked child has become `sleep`
            left = [p for p in _inside(hosts.names[1]) if p.name() == "sleep"]
            if left:
                break
            time.sleep(0.05)
        assert len(left) == 1 and os.getsid(left[0].pid) == left[0].pid  # a session leader
    assert all(_gone(p) for p in left)
    assert not set(hosts.names) & _namespaces()


def test_the_bucket_is_a_quarter_millisecond_of_the_rate_and_never_under_four_frames() -> None:
    # 400 Mbit/s: 50 MB/s for 0.25 ms; 100 Mbit/s: 3125 B would be about two frames
    assert _burst_bytes(400e6) == 12_500
    assert _burst_bytes(100e6) == TBF_MIN_BURST_PACKETS * 1514
    # small beside a gradient bucket: mlp's 0.6 MB all-reduce
    assert _burst_bytes(400e6) < 0.025 * 603_176


@needs_namespaces
def test_a_shaped_loopback_carries_its_rate_and_goes_away_with_what_ran_inside() -> None:
    before = _namespaces()
    with shaped_loopback(RATE_MBIT) as name:
        assert name in _namespaces()
        shown = subprocess.run(
            ["ip", "netns", "exec", name, "tc", "qdisc", "show", "dev", "lo"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "tbf" in shown and f"rate {RATE_MBIT:g}Mbit" in shown, shown
        # a process still inside when the body ends is ended with the namespace
        sleeper = subprocess.Popen(["ip", "netns", "exec", name, "sleep", "60"])
        deadline = time.monotonic() + 10
        while str(sleeper.pid) not in _pids_inside(name) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert str(sleeper.pid) in _pids_inside(name)
    # ended (and reaped by the clean-up, so its exit status is not this handle's), not slept out
    assert sleeper.poll() is not None and not psutil.pid_exists(sleeper.pid)
    assert _namespaces() == before


def _pids_inside(name: str) -> list[str]:
    listed = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
    return listed.stdout.split()
