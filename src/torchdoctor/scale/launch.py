"""torchrun command lines for one world size, and the checks made before any is started.

One node: `torchrun --standalone --nproc-per-node N` (a local rendezvous on a free port).
Several nodes: every node runs `--nnodes K --rdzv-backend c10d --rdzv-endpoint HOST:PORT` with
one rendezvous id per world size, the node that owns HOST:PORT hosting the store (the torchrun
docs, "Elastic launch"). Threads per rank are set explicitly at every N: torchrun sets
OMP_NUM_THREADS=1 only when it starts more than one process per node and the variable is unset,
so an N=1 run would otherwise use every core and N=2 one core per rank.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Final

from torchdoctor.core.errors import ScaleError

#: Seconds to keep trying a rendezvous endpoint that another node hosts before calling it
#: unreachable (a connection refused is retried; a name that does not resolve fails at once).
#: Long enough for the hosting node to start its store when both are started together: it
#: imports torch twice (its `torchdoctor scale`, then torchrun) before it listens, which took
#: more than 10 s on a busy 2-core host (two namespaces started at once; the other node gave
#: up, and the hosting node's torchrun then waited out its join timeout). Half the join timeout.
RDZV_REACH_TIMEOUT_S: Final = 60.0
#: Seconds a node's torchrun waits for the others to join (torchrun's own default is 600).
RDZV_JOIN_TIMEOUT_S: Final = 120
#: Seconds one torchrun job of the study may take before it is stopped.
JOB_TIMEOUT_S: Final = 900.0


@dataclass(frozen=True)
class Topology:
    """Where the ranks run: `nproc` per node on `nnodes` nodes, this one `node_rank`."""

    nproc: int
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    #: This node's address as the others reach it (torchrun's --local-addr); None: its host
    #: name's, which a multi-homed node or a network namespace must override.
    local_addr: str | None = None

    @property
    def world_size(self) -> int:
        return self.nproc * self.nnodes


def torchrun_args(topology: Topology, *, run_id: str) -> list[str]:
    """torchrun's options (after `python -m torch.distributed.run`) for `topology`."""
    if topology.nnodes == 1:
        return ["--standalone", "--nnodes", "1", "--nproc-per-node", str(topology.nproc)]
    return [
        "--nnodes",
        str(topology.nnodes),
        "--node-rank",
        str(topology.node_rank),
        "--nproc-per-node",
        str(topology.nproc),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        str(topology.rdzv_endpoint),
        "--rdzv-id",
        run_id,
        "--rdzv-conf",
        f"join_timeout={RDZV_JOIN_TIMEOUT_S}" + (",is_host=true" if _hosts(topology) else ""),
        *(["--local-addr", topology.local_addr] if topology.local_addr else []),
    ]


def _hosts(topology: Topology) -> bool:
    """Whether this node starts the rendezvous store: node 0, when the endpoint is one of its
    addresses. torchrun guesses it from the host name, which misses an address that is not
    the name's (a second interface, a network namespace), and then no node hosts it."""
    if topology.node_rank != 0 or topology.rdzv_endpoint is None:
        return False
    return _is_local(parse_endpoint(topology.rdzv_endpoint)[0])


def rank_env(threads: int, out_dir: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The ranks' environment: `threads` per rank at every N (see the module)."""
    from torchdoctor.scale._ddp_params import OUT_ENV

    env = dict(os.environ if base is None else base)
    env["OMP_NUM_THREADS"] = str(threads)
    env[OUT_ENV] = out_dir
    return env


def check_backend(backend: str) -> None:
    """Raise `ScaleError` when torch.distributed here lacks `backend`."""
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        raise ScaleError("this torch was built without torch.distributed")
    if backend == "gloo":
        ok, why = dist.is_gloo_available(), "this torch was built without gloo"
    elif backend == "nccl":
        ok = dist.is_nccl_available() and torch.cuda.is_available()
        why = "NCCL needs CUDA GPUs and a torch built with NCCL; on CPU use --backend gloo"
    else:
        raise ScaleError(f"unknown backend {backend!r}", hint="use gloo (CPU) or nccl (GPU)")
    if not ok:
        raise ScaleError(f"backend {backend!r} is not available", hint=why)


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ScaleError(
            f"cannot read rendezvous endpoint {endpoint!r}", hint="write it as HOST:PORT"
        )
    return host, int(port)


def _is_local(host: str) -> bool:
    if host in ("localhost", socket.gethostname()) or host.startswith("127."):
        return True
    try:
        address = socket.gethostbyname(host)
    except OSError:
        return False
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind((address, 0))  # only an address of this machine binds
        return True
    except OSError:
        return False


def check_rendezvous(topology: Topology, *, timeout_s: float | None = None) -> None:
    """Raise `ScaleError` when a node that does not host the rendezvous cannot reach it within
    `timeout_s` (default `RDZV_REACH_TIMEOUT_S`)."""
    timeout_s = RDZV_REACH_TIMEOUT_S if timeout_s is None else timeout_s
    if topology.nnodes == 1:
        return
    if topology.rdzv_endpoint is None:
        raise ScaleError("several nodes need a rendezvous", hint="pass --rdzv-endpoint HOST:PORT")
    host, port = parse_endpoint(topology.rdzv_endpoint)
    try:
        socket.getaddrinfo(host, port)
    except OSError:
        raise ScaleError(
            f"rendezvous host {host!r} does not resolve", hint="check --rdzv-endpoint"
        ) from None
    if topology.node_rank == 0 and _is_local(host):
        return  # this node hosts the store torchrun starts
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((host, port), timeout=min(2.0, timeout_s)).close()
            return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise ScaleError(
                    f"rendezvous {host}:{port} cannot be reached ({exc.strerror or exc}) "
                    f"after {timeout_s:.0f} s",
                    hint="start node 0 first, and check the address, the port and the firewall",
                ) from None
            time.sleep(0.5)


def warn_oversubscribed(world_on_node: int, threads: int) -> str | None:
    """A warning when the ranks' threads on this node outnumber its cores (not refused: a
    study may want to see it)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if cores and world_on_node * threads > cores:
        return (
            f"{world_on_node} rank(s) x {threads} thread(s) is more than the {cores} core(s) "
            "here: ranks will share cores and the scaling measured will say so"
        )
    return None
