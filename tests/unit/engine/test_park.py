"""Parking a job's trained state off the GPU (`torchdoctor.engine.park`) on a fake device.

`tests/fake_gpu.py` models the CUDA caching allocator: live tensors keep their blocks through
`empty_cache`, which returns only cached free ones. A job trained there is parked: every
weight, gradient, buffer and optimizer state tensor leaves the device, its blocks go back,
and after unparking it trains on exactly as a twin that was never parked.
"""

from __future__ import annotations

from typing import Any

import torch

from fake_gpu import FakeCuda, FakeGpu
from torchdoctor.engine import Parking, trained_state
from torchdoctor.procs import Park, Parked, Prepare, SessionHost, SessionSpec, Unpark

CAPACITY = 2**20


class Job:
    """A small model with a BatchNorm (buffers) and Adam, trained on `cuda`'s device."""

    def __init__(self, cuda: FakeCuda) -> None:
        torch.manual_seed(0)
        self.cuda = cuda
        self.model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8))
        for p in self.model.parameters():
            p.data = cuda.to_device(p.data)
        for owner in self.model.modules():
            for name, b in owner._buffers.items():
                if b is not None:
                    owner._buffers[name] = cuda.to_device(b)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=0.01)
        self.data = torch.Generator().manual_seed(1)

    def step(self) -> float:
        x = torch.randn(16, 8, generator=self.data)
        loss = (self.model(x) - x).pow(2).mean()
        loss.backward()
        self.opt.step()
        # What a GPU allocates in the step lives on the device: gradients, Adam's moments,
        # the buffers BatchNorm updated in place (its step counter is a host scalar).
        for p in self.model.parameters():
            self.cuda.adopt(p.grad)
        for state in self.opt.state.values():
            self.cuda.adopt(state["exp_avg"])
            self.cuda.adopt(state["exp_avg_sq"])
        return float(loss.detach())

    def state_bytes(self) -> int:
        params = sum(p.numel() * 4 for p in self.model.parameters())
        buffers = sum(b.untyped_storage().nbytes() for b in self.model.buffers())
        return 4 * params + buffers  # weight, gradient, two moments; running stats, counter


def test_empty_cache_leaves_live_state_and_parking_frees_it() -> None:
    gpu = FakeGpu(CAPACITY)
    cuda = FakeCuda(gpu)
    job = Job(cuda)
    job.step()
    held = cuda.allocated()
    cuda.empty_cache()
    assert cuda.allocated() == held == job.state_bytes()  # the live state survives it
    params = list(job.model.parameters())
    state_keys = {id(p): sorted(job.opt.state[p]) for p in params}

    parked = Parking(cuda).park([job.model], [job.opt])

    assert parked.moved_bytes == held and parked.pinned is None
    assert parked.left_bytes == cuda.allocated() == 0
    assert gpu.reserved() == 0  # the freed blocks went back to the device
    # The job keeps its own objects: the optimizer still steps these parameters.
    assert list(job.model.parameters()) == params
    assert {id(p): sorted(job.opt.state[p]) for p in params} == state_keys


def test_an_unparked_job_trains_on_as_if_never_parked() -> None:
    gpu = FakeGpu(CAPACITY)
    parked_job, twin = Job(FakeCuda(gpu)), Job(FakeCuda(gpu))
    parking = Parking(parked_job.cuda)
    losses, twin_losses = [], []
    for _ in range(3):
        losses.append(parked_job.step())
        twin_losses.append(twin.step())
        parking.park([parked_job.model], [parked_job.opt])
        back = parking.unpark()
        assert back.moved_bytes == parked_job.state_bytes()
        assert parked_job.cuda.allocated() == parked_job.state_bytes()
    assert losses == twin_losses
    mine, theirs = parked_job.model.state_dict(), twin.model.state_dict()
    assert all(torch.equal(mine[k], theirs[k]) for k in theirs)


def test_a_pinned_job_moves_nothing() -> None:
    cuda = FakeCuda(FakeGpu(CAPACITY))
    job = Job(cuda)
    job.step()
    held = cuda.allocated()
    parked = Parking(cuda).park([job.model], [job.opt], pinned="CUDA graphs")
    assert (parked.moved_bytes, parked.left_bytes, parked.pinned) == (0, held, "CUDA graphs")
    assert cuda.allocated() == held


class GraphSession:
    """A session whose steps replay CUDA graphs (`TrainingSession.replays_graphs`)."""

    replays_graphs = True

    def __init__(self) -> None:
        cuda = FakeCuda.active
        assert cuda is not None
        self.raw_model = torch.nn.Linear(4, 4)
        self.raw_model.weight.data = cuda.to_device(self.raw_model.weight.data)
        self.optimizer = torch.optim.SGD(self.raw_model.parameters(), lr=0.1)

    def run_steps(self, n: int, *, measure_phases: bool) -> list[Any]:
        return []


def make_graph_session(workload: str, recipe: dict[str, Any], **_: Any) -> GraphSession:
    return GraphSession()


def test_a_worker_parks_on_a_gpu_only_and_never_a_graph_session() -> None:
    cuda = FakeCuda(FakeGpu(CAPACITY))
    FakeCuda.active = cuda
    try:
        factory = f"{__name__}:make_graph_session"
        on_gpu = SessionHost(cuda=cuda, mover=cuda)
        on_gpu.handle(Prepare(SessionSpec("g", {}, device="cuda", factory=factory)))
        reply = on_gpu.handle(Park())
        assert isinstance(reply, Parked) and reply.moved_bytes == 0 and reply.pinned
        assert reply.left_bytes == cuda.allocated() > 0
        _, _, pinned = trained_state(on_gpu.session)
        assert pinned == reply.pinned
        on_cpu = SessionHost(cuda=cuda, mover=cuda)
        on_cpu.handle(Prepare(SessionSpec("g", {}, device="cpu", factory=factory)))
        assert on_cpu.handle(Park()) == on_cpu.handle(Unpark()) == Parked()
    finally:
        FakeCuda.active = None


def test_a_park_reads_what_stayed_and_the_device_as_it_leaves_it() -> None:
    """What an optimizer does not step stays through a park (a plain tensor the job keeps, a
    frozen model beside the trained one); the park's reply says how much stayed and what the
    device holds in all, every process counted, so the tuner can decide whether a second
    process fits (tune/turns.py)."""
    gpu = FakeGpu(CAPACITY)
    neighbour = FakeCuda(gpu)
    other = neighbour.workspace(CAPACITY // 8)  # another process's live tensor
    cuda = FakeCuda(gpu)
    job = Job(cuda)
    job.step()
    kept = cuda.workspace(CAPACITY // 4)  # a plain tensor of the job's own
    frozen = torch.nn.Linear(64, 64).requires_grad_(False)
    frozen.weight.data = cuda.to_device(frozen.weight.data)
    stays = kept.untyped_storage().nbytes() + frozen.weight.untyped_storage().nbytes()
    parked = Parking(cuda).park([job.model], [job.opt])
    assert parked.moved_bytes == job.state_bytes()
    assert parked.left_bytes == cuda.allocated() == stays
    assert parked.total_bytes == CAPACITY
    assert parked.free_bytes == CAPACITY - stays - other.untyped_storage().nbytes()
