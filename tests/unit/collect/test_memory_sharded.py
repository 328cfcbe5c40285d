"""A sharded step's memory owners (FSDP2's DTensors) on a 2-rank gloo job
(tests/sharded_job.py): each rank's parameters, gradients and optimizer state are its shards
(half of the model's, every dimension being even), not the whole tensors the DTensors
describe, and the gathered parameters the forward saves for backward are weights, not
activations: a rank saves the activations the same model saves unsharded on its batch."""

from __future__ import annotations

import pytest
import torch

from sharded_job import batch, blocks_model, shard, spawn_ranks
from torchdoctor.collect.tensor_memory import StepMeter
from torchdoctor.core.memory_owners import StepMemory
from torchdoctor.core.sharded import gathered_parameters

# Two gloo ranks spawned for every test: a process-launching check, in the untimed studies
# (it asserts behaviour, no timing) so that the fast tier stays fast.
pytestmark = [
    pytest.mark.skipif(
        not torch.distributed.is_available(), reason="this torch build has no torch.distributed"
    ),
    pytest.mark.study,
    pytest.mark.untimed,
]


def _measure(model: torch.nn.Module, *, rank: int, gathered: bool) -> StepMemory:
    """A warm-up step, then one measured step of `model` with Adam (as the script probe
    measures one)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(index: int) -> None:
        model(batch(index, rank)).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    step(0)
    meter = StepMeter(
        weights=[*model.parameters(), *model.buffers()],
        trainable=list(model.parameters()),
        optimizers=[optimizer],
        device=torch.device("cpu"),
        gathered=gathered_parameters([model]) if gathered else (),
    )
    hook = optimizer.register_step_pre_hook(lambda *_: meter.end_forward_backward())
    meter.begin()
    step(1)
    hook.remove()
    return meter.end(batch_size=6, device="cpu")


def _rank(rank: int, out: str) -> None:
    sharded = _measure(shard(blocks_model()), rank=rank, gathered=True)
    plain = _measure(blocks_model(), rank=rank, gathered=False)
    if rank == 0:
        torch.save({"sharded": sharded.model_dump(), "plain": plain.model_dump()}, out)


def test_a_sharded_step_counts_each_rank_its_shards(tmp_path) -> None:
    out = str(tmp_path / "rank0.pt")
    spawn_ranks(_rank, out)
    seen = torch.load(out)
    sharded, plain = seen["sharded"], seen["plain"]
    assert sharded["parameters_bytes"] * 2 == plain["parameters_bytes"] > 0
    assert sharded["gradients_bytes"] * 2 == plain["gradients_bytes"] > 0
    # Adam's two moments are sharded; its step counters are plain scalars on every rank
    counters = 4 * len(list(blocks_model().parameters()))
    moments = plain["optimizer_state_bytes"] - counters
    assert sharded["optimizer_state_bytes"] == moments // 2 + counters
    assert sharded["activations_bytes"] == plain["activations_bytes"] > 0
