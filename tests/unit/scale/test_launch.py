"""torchrun's options per topology, threads held fixed, and the rendezvous check."""

from __future__ import annotations

import socket

import pytest

from torchdoctor.core.errors import ScaleError
from torchdoctor.scale import Topology, check_rendezvous, parse_endpoint, torchrun_args
from torchdoctor.scale.launch import rank_env, warn_oversubscribed


def test_one_node_is_standalone_and_several_use_the_endpoint() -> None:
    assert torchrun_args(Topology(2), run_id="x")[:1] == ["--standalone"]
    args = torchrun_args(Topology(2, nnodes=2, node_rank=1, rdzv_endpoint="h:1"), run_id="x")
    assert args[args.index("--rdzv-endpoint") + 1] == "h:1"
    assert args[args.index("--node-rank") + 1] == "1"


def test_threads_are_set_at_every_world_size() -> None:
    env = rank_env(3, "/out", base={})
    assert env["OMP_NUM_THREADS"] == "3"  # torchrun would leave N=1 unset


def test_oversubscription_is_a_warning() -> None:
    assert warn_oversubscribed(10_000, 1) is not None
    assert warn_oversubscribed(1, 1) is None


def test_unreachable_rendezvous_fails_fast() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    topology = Topology(1, nnodes=2, node_rank=1, rdzv_endpoint=f"127.0.0.1:{port}")
    with pytest.raises(ScaleError, match="cannot be reached"):
        check_rendezvous(topology, timeout_s=0.3)
    with pytest.raises(ScaleError, match="HOST:PORT"):
        parse_endpoint("h0")
