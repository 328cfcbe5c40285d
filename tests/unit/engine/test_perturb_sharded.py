"""The quality yardstick's perturbation on sharded parameters (FSDP2's DTensors).

Two gloo ranks on the CPU shard a small model with `fully_shard`; the perturbation must run
on the DTensors (a plain tensor times a DTensor raises "mixed torch.Tensor and DTensor") and
give, gathered, exactly the weights the same model gets unsharded.
"""

from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp
from torch import nn

from torchdoctor.engine.perturb import perturb_weights

# Two gloo ranks spawned for every test: a process-launching check, in the untimed studies
# (it asserts behaviour, no timing) so that the fast tier stays fast.
pytestmark = [
    pytest.mark.skipif(
        not torch.distributed.is_available(), reason="this torch build has no torch.distributed"
    ),
    pytest.mark.study,
    pytest.mark.untimed,
]


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 3))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        model = _model()
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
        perturb_weights(model, 3)
        full = {name: p.full_tensor() for name, p in model.named_parameters()}
        if rank == 0:
            torch.save(full, out)
    finally:
        dist.destroy_process_group()


def test_a_sharded_model_is_perturbed_as_the_same_model_unsharded(tmp_path) -> None:
    out = str(tmp_path / "sharded.pt")
    mp.spawn(_rank, args=(2, _free_port(), out), nprocs=2, join=True)
    sharded = torch.load(out)
    plain = _model()
    before = {name: p.detach().clone() for name, p in plain.named_parameters()}
    perturb_weights(plain, 3)
    for name, p in plain.named_parameters():
        assert not torch.equal(p, before[name])  # the perturbation changed the weights
        assert torch.equal(sharded[name], p.detach()), name
