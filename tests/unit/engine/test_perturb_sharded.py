"""The quality yardstick's perturbation on sharded parameters (FSDP2's DTensors).

Two gloo ranks on the CPU shard a small model with `fully_shard`; the perturbation must run
on the DTensors (a plain tensor times a DTensor raises "mixed torch.Tensor and DTensor") and
give, gathered, exactly the weights the same model gets unsharded.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sharded_job import spawn_ranks
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


def _rank(rank: int, out: str) -> None:
    from torch.distributed.fsdp import fully_shard

    model = _model()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    perturb_weights(model, 3)
    full = {name: p.full_tensor() for name, p in model.named_parameters()}
    if rank == 0:
        torch.save(full, out)


def test_a_sharded_model_is_perturbed_as_the_same_model_unsharded(tmp_path) -> None:
    out = str(tmp_path / "sharded.pt")
    spawn_ranks(_rank, out)
    sharded = torch.load(out)
    plain = _model()
    before = {name: p.detach().clone() for name, p in plain.named_parameters()}
    perturb_weights(plain, 3)
    for name, p in plain.named_parameters():
        assert not torch.equal(p, before[name])  # the perturbation changed the weights
        assert torch.equal(sharded[name], p.detach()), name
