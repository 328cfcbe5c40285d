"""Parking a sharded job (FSDP2's DTensors) on a 2-rank gloo job (tests/sharded_job.py).

Each rank's local shards leave their storages (weights, gradients, Adam's moments), the bytes
moved are the rank's shards, not the whole tensors the DTensors describe, the parameters stay
the same objects, and after unparking the job trains on exactly as a twin never parked. The
"device" is the CPU here: a mover that copies to a host tensor of its own stands for the GPU's
(the accounting of a real one is tests/unit/engine/test_park.py's fake GPU)."""

from __future__ import annotations

import pytest
import torch

from sharded_job import batch, blocks_model, shard, spawn_ranks
from torchdoctor.engine import Parking

# Two gloo ranks spawned for every test: a process-launching check, in the untimed studies
# (it asserts behaviour, no timing) so that the fast tier stays fast.
pytestmark = [
    pytest.mark.skipif(
        not torch.distributed.is_available(), reason="this torch build has no torch.distributed"
    ),
    pytest.mark.study,
    pytest.mark.untimed,
]


class HostCopies:
    """A `DeviceMover` whose device is the CPU: parking copies into tensors of its own, which
    are the host; every other tensor is on the device."""

    def __init__(self) -> None:
        self.host: list[torch.Tensor] = []

    def on_device(self, tensor: torch.Tensor) -> bool:
        ours = {t.untyped_storage()._cdata for t in self.host}
        return tensor.untyped_storage()._cdata not in ours

    def to_host(self, tensor: torch.Tensor) -> torch.Tensor:
        copy = tensor.clone()
        self.host.append(copy)
        return copy

    def to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.clone()

    def finish(self) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def allocated_bytes(self) -> int:
        return 0

    def device_memory(self) -> tuple[int, int]:
        return 0, 0


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int, rank: int) -> float:
    loss = model(batch(step, rank)).pow(2).mean()
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def _rank(rank: int, out: str) -> None:
    from torch.distributed.tensor import DTensor

    parked_model, twin = shard(blocks_model()), shard(blocks_model())
    parked_opt = torch.optim.Adam(parked_model.parameters(), lr=1e-2)
    twin_opt = torch.optim.Adam(twin.parameters(), lr=1e-2)
    losses, twin_losses, moved, emptied, kept = [], [], [], [], []
    parking = Parking(HostCopies())
    for step in range(3):
        losses.append(_step(parked_model, parked_opt, step, rank))
        twin_losses.append(_step(twin, twin_opt, step, rank))
        params = list(parked_model.parameters())
        locals_ = [
            t._local_tensor
            for p in params
            for t in (p, p.grad, parked_opt.state[p]["exp_avg"], parked_opt.state[p]["exp_avg_sq"])
        ]
        parked = parking.park([parked_model], [parked_opt])
        moved.append(parked.moved_bytes)
        emptied.append(all(t.untyped_storage().nbytes() == 0 for t in locals_))
        back = parking.unpark()
        kept.append(
            back.moved_bytes == parked.moved_bytes
            and list(parked_model.parameters()) == params
            and all(isinstance(p, DTensor) for p in params)
        )
        parked_opt.zero_grad()
        twin_opt.zero_grad()
    full = {n: p.full_tensor() for n, p in parked_model.named_parameters()}
    twin_full = {n: p.full_tensor() for n, p in twin.named_parameters()}
    if rank == 0:
        torch.save(
            {
                "losses": losses,
                "twin_losses": twin_losses,
                "moved": moved,
                "emptied": emptied,
                "kept": kept,
                # Adam's step counters: plain tensors, which the CPU "device" moves too
                "counters": sum(
                    parked_opt.state[p]["step"].untyped_storage().nbytes()
                    for p in parked_model.parameters()
                ),
                "same": all(torch.equal(full[n], twin_full[n]) for n in full),
            },
            out,
        )


def test_a_sharded_job_parks_its_shards_and_trains_on_as_if_never_parked(tmp_path) -> None:
    out = str(tmp_path / "rank0.pt")
    spawn_ranks(_rank, out)
    seen = torch.load(out)
    plain = sum(p.numel() * p.element_size() for p in blocks_model().parameters())
    # weight, gradient and two moments per parameter, each rank half of each (every dimension
    # of blocks_model is even, so the shards carry no padding), and Adam's step counters
    assert seen["moved"] == [4 * plain // 2 + seen["counters"]] * 3
    assert seen["emptied"] == [True] * 3
    assert seen["kept"] == [True] * 3
    assert seen["losses"] == seen["twin_losses"]
    assert seen["same"]
