"""Two hosts on one machine: two network namespaces joined by a veth pair whose bandwidth `tc`
shapes, for seeing (and testing) what the network does to a job.

Made with iproute2 (`ip netns`, `ip link`, `tc qdisc ... tbf`): the token bucket filter is in
every kernel, netem (delay, loss) is not, so only bandwidth is shaped here. The link's MTU is
set to 1500: a veth pair's default MTU can exceed tbf's burst, and tbf drops every packet
larger than its burst (tc-tbf(8)). Both ends are shaped, so traffic each way sees the rate.

`two_hosts` is a context manager; on the way out, whatever happened, every process still
running inside either namespace is ended (`end_processes_inside`: a job stopped by a deadline
leaves ranks that sit in sessions of their own) and the namespaces are deleted; `unavailable()`
says why they cannot be made here (not root, no `ip`), for a clear skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any, Final

import psutil

from torchdoctor.core.errors import ScaleError
from torchdoctor.procs import end_processes, run_command

#: The two ends' addresses, on a /30 of the TEST-NET-2 block (RFC 5737: never routed).
ADDRESSES: Final = ("198.51.100.1", "198.51.100.2")
#: A standard Ethernet MTU: below tbf's burst, so shaped packets pass (see the module).
LINK_MTU: Final = 1500
#: tbf's queue: packets wait at most this long before being dropped (tc-tbf(8)'s `latency`).
#: Deep enough to hold what TCP sends at once (at 100 Mbit/s, 12.5 MB): a shallow queue drops
#: a collective's burst, and TCP's congestion control then runs below the rate, which the
#: alpha-beta model of a link at its rate does not describe. Nothing else shares the link.
TBF_LATENCY_MS: Final = 1000
#: tbf's bucket, in seconds of traffic at the rate. The bucket fills while the link idles and
#: is then spent at the line rate (tc-tbf(8), "burst": "the maximum amount of bytes that
#: tokens can be available for instantaneously"). A training step's gradients follow
#: milliseconds of computation with the link idle, so they start with a full bucket; the
#: microbenchmark's repeats follow each other with only a barrier between them, so they start
#: with a nearly empty one. A bucket of 1 ms (this module's former rule) gave a job's 0.6 MB
#: all-reduce at 400 Mbit/s up to 1 ms (8%) that the microbenchmark did not see, and passed
#: every size below 50 kB at the line rate; 0.25 ms bounds both to 2% there. It must not be
#: much smaller: tbf's watchdog (a high-resolution timer, then the transmit softirq) wakes late
#: on a busy host, and tokens arriving meanwhile past a full bucket are lost, so the link would
#: carry less than its rate. tc-tbf(8)'s floor of rate / HZ dates from tick-driven timers.
TBF_BURST_S: Final = 0.25e-3
#: A bucket smaller than one frame passes nothing (tc-tbf(8)); a few frames leave the watchdog
#: slack at low rates, where 0.25 ms of the rate is less than a frame.
TBF_MIN_BURST_PACKETS: Final = 4
#: The Ethernet header tbf counts on a veth end, on top of the MTU's bytes.
ETHERNET_HEADER_BYTES: Final = 14
#: Seconds the processes left inside the namespaces get to exit on SIGTERM before SIGKILL
#: (a rank writes its records as it unwinds).
END_GRACE_S: Final = 10.0


@dataclass(frozen=True)
class TwoHosts:
    """The namespaces' names and addresses; `exec_prefix(i)` runs a command inside host i."""

    names: tuple[str, str]
    addresses: tuple[str, str] = ADDRESSES

    def exec_prefix(self, host: int) -> list[str]:
        return ["ip", "netns", "exec", self.names[host]]


def unavailable() -> str | None:
    """Why two namespaces cannot be made here, or None when they can."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2's `ip` and `tc` are not installed"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "making network namespaces needs root (CAP_NET_ADMIN)"
    probe = f"tdprobe{uuid.uuid4().hex[:6]}"
    made = run_command(["ip", "netns", "add", probe])
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip() or made.returncode}"
    run_command(["ip", "netns", "del", probe])
    return None


def _ip(*args: str) -> None:
    done = run_command(list(args))
    if done.returncode != 0:
        raise ScaleError(f"`{' '.join(args)}` failed: {done.stderr.strip() or done.returncode}")


def _burst_bytes(rate_bits: float) -> int:
    """tbf's bucket: `TBF_BURST_S` of traffic at the rate, at least `TBF_MIN_BURST_PACKETS`
    full frames (see those constants)."""
    frame = LINK_MTU + ETHERNET_HEADER_BYTES
    return max(TBF_MIN_BURST_PACKETS * frame, int(rate_bits / 8 * TBF_BURST_S))


def shape(hosts: TwoHosts, rate_mbit: float) -> None:
    """Limit both ends of the link to `rate_mbit` megabits per second (replaces a former rate)."""
    rate_bits = rate_mbit * 1e6
    for i, name in enumerate(hosts.names):
        _ip(
            "ip", "netns", "exec", name, "tc", "qdisc", "replace", "dev", f"veth{i}", "root",
            "tbf", "rate", f"{rate_bits:.0f}bit", "burst", str(_burst_bytes(rate_bits)),
            "latency", f"{TBF_LATENCY_MS}ms",
        )  # fmt: skip


def end_processes_inside(hosts: TwoHosts, grace_s: float = END_GRACE_S) -> list[int]:
    """End every process inside the namespaces (`ip netns pids`) as a tree is ended
    (`procs.end_processes`: SIGCONT, SIGTERM, SIGKILL those left after `grace_s`); the pids
    found."""
    return _end_inside(hosts.names, grace_s)


def _end_inside(names: Sequence[str], grace_s: float) -> list[int]:
    found: list[int] = []
    for name in names:
        listed = run_command(["ip", "netns", "pids", name])
        found += [int(pid) for pid in listed.stdout.split() if pid.isdigit()]
    processes = []
    for pid in found:
        with contextlib.suppress(psutil.NoSuchProcess):
            processes.append(psutil.Process(pid))
    end_processes(processes, grace_s=grace_s)
    return found


@contextlib.contextmanager
def two_hosts(rate_mbit: float | None = None) -> Iterator[TwoHosts]:
    """Two namespaces joined by a veth pair (ends `veth0`, `veth1`), shaped to `rate_mbit`."""
    why = unavailable()
    if why:
        raise ScaleError(f"cannot make two network namespaces: {why}")
    tag = uuid.uuid4().hex[:6]
    hosts = TwoHosts(names=(f"td{tag}a", f"td{tag}b"))
    # SIGTERM (`timeout`, a scheduler, `kill`) would end the process without this `finally`,
    # leaving the namespaces behind: made an exit, it unwinds through the cleanup.
    previous = _exit_on_sigterm()
    try:
        for name in hosts.names:
            _ip("ip", "netns", "add", name)
        _ip("ip", "link", "add", f"td{tag}0", "type", "veth", "peer", "name", f"td{tag}1")
        for i, name in enumerate(hosts.names):
            end = f"td{tag}{i}"
            _ip("ip", "link", "set", end, "netns", name)
            _ip("ip", "netns", "exec", name, "ip", "link", "set", end, "name", f"veth{i}")
            _ip("ip", "netns", "exec", name, "ip", "link", "set", f"veth{i}", "mtu", str(LINK_MTU))
            _ip(
                "ip",
                "netns",
                "exec",
                name,
                "ip",
                "addr",
                "add",
                f"{hosts.addresses[i]}/30",
                "dev",
                f"veth{i}",
            )
            _ip("ip", "netns", "exec", name, "ip", "link", "set", f"veth{i}", "up")
            _ip("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
        if rate_mbit is not None:
            shape(hosts, rate_mbit)
        yield hosts
    finally:
        end_processes_inside(hosts)  # a namespace outlives its deletion while a process is in it
        for name in hosts.names:  # deleting a namespace deletes the veth end inside it
            run_command(["ip", "netns", "del", name])
        run_command(["ip", "link", "del", f"td{tag}0"])
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def shaped_loopback(rate_mbit: float) -> Iterator[str]:
    """One namespace whose loopback tbf shapes to `rate_mbit` megabits per second (an MTU under
    tbf's bucket, the bucket and queue as `shape`'s): the ranks of a one-machine job started
    inside it (`ip netns exec NAME ...`) talk over a link of that rate. Yields its name; every
    process left inside is ended and the namespace deleted on the way out."""
    why = unavailable()
    if why:
        raise ScaleError(f"cannot make a network namespace: {why}")
    name = f"tdlo{uuid.uuid4().hex[:6]}"
    rate_bits = rate_mbit * 1e6
    previous = _exit_on_sigterm()  # as `two_hosts`: a SIGTERM unwinds through the cleanup
    try:
        _ip("ip", "netns", "add", name)
        _ip("ip", "netns", "exec", name, "ip", "link", "set", "lo", "mtu", str(LINK_MTU), "up")
        _ip(
            "ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root",
            "tbf", "rate", f"{rate_bits:.0f}bit", "burst", str(_burst_bytes(rate_bits)),
            "latency", f"{TBF_LATENCY_MS}ms",
        )  # fmt: skip
        yield name
    finally:
        _end_inside([name], END_GRACE_S)
        run_command(["ip", "netns", "del", name])
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm() -> signal.Handlers | Callable[[int, FrameType | None], Any] | int | None:
    """Make SIGTERM raise SystemExit in this (main) thread; the handler it replaces, or None
    where signals cannot be set (not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def _exit(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, _exit)
