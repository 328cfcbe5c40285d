"""StepController: a real training loop in this process, driven through a scripted channel."""

from __future__ import annotations

import gc
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from torchdoctor.collect import (
    DriverRun,
    DriverStop,
    ScriptChunk,
    ScriptError,
    ScriptReady,
)
from torchdoctor.collect.control import StepController, read_losses
from torchdoctor.collect.hooks import CollectConfig, Instrumentation, StopCollection
from torchdoctor.collect.inject import Injection


class ScriptedChannel:
    """Answers each recv with the next command; EOF once they run out (the tuner is gone).

    `on_recv` runs before each answer (a test's fake clock moves while the script waits)."""

    def __init__(self, commands: list[object], on_recv: Callable[[], None] = lambda: None):
        self.commands = list(commands)
        self.sent: list[Any] = []
        self.on_recv = on_recv
        self.closed = False

    def send(self, obj: Any) -> None:
        self.sent.append(obj)

    def recv(self) -> Any:
        self.on_recv()
        if not self.commands:
            raise EOFError
        return self.commands.pop(0)

    def close(self) -> None:
        self.closed = True


class Loop:
    """A tiny torch.optim training loop; records the loss each step computed."""

    def __init__(
        self, *, loader: bool = False, accumulate: int = 1, zero_grad: bool = True
    ) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Linear(4, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.loader = loader
        self.accumulate = accumulate
        #: nanoGPT's order: zero_grad after the step, reached only after the first boundary
        self.zero_grad = zero_grad
        self.losses: list[list[float]] = []
        self.steps_done = 0
        self.tick: Callable[[], None] = lambda: None

    def batches(self) -> Any:
        data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
        while True:
            if self.loader:
                yield from torch.utils.data.DataLoader(data, batch_size=4)
            else:
                yield torch.randn(4, 4), torch.randn(4, 1)

    def run(self, steps: int) -> None:
        batches = self.batches()
        for _ in range(steps):
            step_losses = []
            for _ in range(self.accumulate):
                x, y = next(batches)
                loss = torch.nn.functional.mse_loss(self.model(x), y)
                loss.backward()
                step_losses.append(float(loss.detach()))
            self.losses.append(step_losses)
            self.tick()
            self.opt.step()
            if self.zero_grad:
                self.opt.zero_grad(set_to_none=True)
            else:
                for p in self.model.parameters():
                    p.grad = None
            self.steps_done += 1


def run_controlled(
    inst: Instrumentation, controller: Any, loop: Any, steps: int, recipe: dict[str, Any] | None
) -> tuple[Any, str]:
    """Run `loop` under `inst` with `controller` as a probe and `recipe` injected after the
    probes, as the bootstrap does; returns the controller and how the run ended."""
    inst.add_probe(controller)
    injection = Injection(recipe, device="cpu") if recipe is not None else None
    controller.injection = injection
    ended_by = "completed"
    inst.install()
    if injection is not None:
        injection.install()
    try:
        loop.run(steps)
    except StopCollection:
        ended_by = "max_steps"
    finally:
        if injection is not None:
            injection.uninstall()
        inst.uninstall()
    controller.finish(ended_by, 0, None)
    return controller, ended_by


def drive(
    loop: Any,
    steps: int,
    channel: ScriptedChannel,
    clock: Callable[[], float] | None = None,
    *,
    recipe: dict[str, Any] | None = None,
    **controller: Any,
) -> tuple[StepController, str]:
    """Run `loop` instrumented and controlled, as the bootstrap does, with `recipe` injected
    after the probes; returns how it ended."""
    inst = Instrumentation(CollectConfig(warmup=0, profile_steps=0, cuda_events=False))
    kwargs: dict[str, Any] = {"clock": clock} if clock is not None else {}
    kwargs.update(controller)
    controller = StepController(channel, inst.recorder, uncounted=inst.syncs.uncounted, **kwargs)
    return run_controlled(inst, controller, loop, steps, recipe)


def test_runs_exactly_the_steps_asked_then_exit_unwinds() -> None:
    loop = Loop()
    channel = ScriptedChannel([DriverRun(3), DriverRun(2), DriverStop()])
    controller, ended_by = drive(loop, 100, channel)
    assert ended_by == "max_steps"
    # The first two steps are start-up (the second ends at the ready boundary), then 3 + 2;
    # exit is raised at the 7th step's boundary, inside its optimizer step.
    assert loop.steps_done == 6
    assert len(loop.losses) == 7
    ready, first, second = channel.sent
    assert isinstance(ready, ScriptReady) and ready.startup_s >= 0
    assert isinstance(first, ScriptChunk) and isinstance(second, ScriptChunk)
    assert [len(first.steps), len(second.steps)] == [3, 2]
    for row in first.steps + second.steps:
        assert len(row) == 3 and row[0] > 0 and row[1] is None
    # The loss is the value of the tensor backward() was called on, in that step.
    got = [r[2] for r in first.steps + second.steps]
    assert got == pytest.approx([s[0] for s in loop.losses[2:7]], rel=0, abs=0)
    assert first.peak_memory_bytes is not None and first.peak_memory_bytes > 0
    assert not first.ended and not second.ended
    assert controller.stopping and channel.closed


def test_script_ending_mid_chunk_reports_what_ran_and_ended() -> None:
    loop = Loop()
    channel = ScriptedChannel([DriverRun(10)])
    _, ended_by = drive(loop, 4, channel)
    assert ended_by == "completed"
    ready, reply = channel.sent
    assert isinstance(ready, ScriptReady)
    assert isinstance(reply, ScriptChunk) and reply.ended is True and reply.exit_code == 0
    assert len(reply.steps) == 2  # steps 3..4; steps 1 and 2 were start-up
    assert [r[2] for r in reply.steps] == [s[0] for s in loop.losses[2:]]


class ManualLoop:
    """Hand-written SGD (no torch.optim), the update after backward as the zoo's script does."""

    def __init__(self, *, optimizer: bool = False) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Linear(4, 1)
        #: built and never stepped (the update is by hand all the same)
        self.unused = torch.optim.SGD(self.model.parameters(), lr=0.1) if optimizer else None
        self.losses: list[float] = []
        self.updates = 0

    def run(self, steps: int) -> None:
        for _ in range(steps):
            loss = self.model(torch.randn(2, 4)).pow(2).mean()
            self.losses.append(float(loss.detach()))
            loss.backward()
            with torch.no_grad():
                for p in self.model.parameters():
                    p -= 0.1 * p.grad
                    p.grad = None
            self.updates += 1


def test_a_script_without_an_optimizer_is_driven_at_its_backward_calls() -> None:
    gc.collect()  # an optimizer left alive by another test would make this one optimizer-mode
    loop = ManualLoop()
    channel = ScriptedChannel([DriverRun(3), DriverRun(2), DriverStop()])
    controller, ended_by = drive(loop, 100, channel)
    assert controller.mode == "backward" and ended_by == "max_steps"
    ready, first, second = channel.sent
    assert isinstance(ready, ScriptReady)
    # Start-up ran two backward calls and the first update; exit is raised at the return of
    # the 7th backward, before its update.
    assert (len(loop.losses), loop.updates) == (7, 6)
    rows = first.steps + second.steps
    assert [len(first.steps), len(second.steps)] == [3, 2]
    assert [r[2] for r in rows] == [loop.losses[i] for i in range(2, 7)]
    assert all(r[0] > 0 and r[1] is None for r in rows)


def test_a_script_that_builds_an_optimizer_is_driven_at_its_steps_only() -> None:
    # Its backward calls may be accumulation micro-steps: it waits for optimizer steps, and
    # one that never comes is the reason given at the end.
    loop = ManualLoop(optimizer=True)
    channel = ScriptedChannel([DriverRun(2)])
    controller, ended_by = drive(loop, 5, channel)
    assert ended_by == "completed" and controller.mode is None
    (reply,) = channel.sent
    assert isinstance(reply, ScriptError) and reply.ended is True
    assert "builds a torch.optim optimizer but never steps it" in reply.reason


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (ManualLoop, "it ran 1 backward() call and stopped"),
        (Loop, "it ran 1 optimizer step and stopped"),
    ],
)
def test_a_script_ending_within_its_start_up_says_how_far_it_got(
    make: Callable[[], Any], expected: str
) -> None:
    gc.collect()
    channel = ScriptedChannel([DriverRun(2)])
    drive(make(), 1, channel)
    (reply,) = channel.sent
    assert isinstance(reply, ScriptError) and reply.ended is True
    assert expected in reply.reason and "start-up" in reply.reason


def test_a_script_that_never_calls_backward_says_so() -> None:
    class Forward:
        def run(self, steps: int) -> None:
            for _ in range(steps):
                torch.nn.Linear(4, 1)(torch.randn(2, 4))

    channel = ScriptedChannel([])
    drive(Forward(), 3, channel)
    (reply,) = channel.sent
    assert isinstance(reply, ScriptError) and "never called backward()" in reply.reason


def test_zero_grad_after_the_step_is_judged_after_a_whole_iteration() -> None:
    # nanoGPT's order: step, then zero_grad(set_to_none=True). The first boundary comes
    # before any zero_grad; the ready record, read at the second, has seen one.
    channel = ScriptedChannel([DriverStop()])
    drive(Loop(), 10, channel, recipe={"set_to_none": False})
    knob = _knob(channel.sent[0], "set_to_none")
    assert knob["status"] == "applied"
    assert knob["applied_at"][0].startswith("zero_grad(set_to_none=true) -> false")


def test_a_knob_whose_site_never_comes_is_reported_not_applied_once() -> None:
    channel = ScriptedChannel([DriverRun(3), DriverStop()])
    drive(Loop(zero_grad=False), 10, channel, recipe={"set_to_none": False})
    knob = _knob(channel.sent[0], "set_to_none")
    assert knob["status"] == "not_applied"
    assert knob["reason"] == "the script never called zero_grad"
    # Only the ready message carries the record: the chunk reply that follows is no other.
    assert [type(m) for m in channel.sent[1:]] == [ScriptChunk]


def _knob(ready: object, name: str) -> dict[str, Any]:
    assert isinstance(ready, ScriptReady) and ready.injection is not None
    (knob,) = [k for k in ready.injection["knobs"] if k["knob"] == name]
    return dict(knob)


def test_samples_from_the_data_loader_and_accumulated_losses_averaged() -> None:
    loop = Loop(loader=True, accumulate=2)
    channel = ScriptedChannel([DriverRun(2)])
    drive(loop, 10, channel)
    rows = channel.sent[1].steps
    assert [r[1] for r in rows] == [4, 4]
    expected = [sum(s) / 2 for s in loop.losses[2:4]]
    assert [r[2] for r in rows] == pytest.approx(expected, rel=1e-6)


def test_waiting_for_a_command_is_no_steps_time() -> None:
    now = [0.0]
    loop = Loop()

    def step_takes_a_second() -> None:
        now[0] += 1.0

    def the_tuner_takes_a_minute() -> None:
        now[0] += 60.0

    loop.tick = step_takes_a_second
    channel = ScriptedChannel([DriverRun(2), DriverRun(2)], on_recv=the_tuner_takes_a_minute)
    drive(loop, 100, channel, clock=lambda: now[0])
    assert [r[0] for r in channel.sent[1].steps + channel.sent[2].steps] == [1.0] * 4


def test_bad_command_is_answered_and_the_script_keeps_waiting() -> None:
    loop = Loop()
    channel = ScriptedChannel([DriverRun(0), {"op": "frobnicate"}, DriverStop()])
    _, ended_by = drive(loop, 100, channel)
    assert ended_by == "max_steps"
    assert [type(m) for m in channel.sent[1:]] == [ScriptError, ScriptError]
    assert "step count >= 1, got 0" in channel.sent[1].reason
    assert "frobnicate" in channel.sent[2].reason
    assert loop.steps_done == 1  # stopped at the ready boundary, inside the second step


def test_read_losses_means_per_step_and_drops_non_finite() -> None:
    steps = [[torch.tensor(1.0), torch.tensor(3.0)], [], [torch.tensor(float("nan"))]]
    assert read_losses(steps) == [2.0, None, None]


class ScalerLoop:
    """fp16-style training with a GradScaler (on the CPU, as torch.amp allows): backward on the
    scaled loss, and one step whose gradients overflow, which the scaler skips."""

    def __init__(self, overflow_at: int) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Linear(4, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
        self.overflow_at = overflow_at
        self.losses: list[float] = []
        self.iterations = 0
        self.updates = 0

    def run(self, steps: int) -> None:
        for i in range(steps):
            loss = torch.nn.functional.mse_loss(self.model(torch.randn(4, 4)), torch.randn(4, 1))
            self.losses.append(float(loss.detach()))
            self.scaler.scale(loss).backward()
            if i == self.overflow_at:  # an fp16 overflow in this step's gradients
                next(iter(self.model.parameters())).grad[0, 0] = float("inf")
            self.scaler.step(self.opt)
            self.scaler.update()
            self.opt.zero_grad(set_to_none=True)
            self.iterations += 1


def test_grad_scaler_skipped_step_is_a_step_and_losses_are_unscaled() -> None:
    loop = ScalerLoop(overflow_at=3)  # the second step of the first chunk
    channel = ScriptedChannel([DriverRun(4), DriverStop()])
    _, ended_by = drive(loop, 100, channel)
    assert ended_by == "max_steps"
    ready, chunk = channel.sent
    assert isinstance(ready, ScriptReady) and isinstance(chunk, ScriptChunk)
    # Two start-up steps and four in the chunk; the stop is raised at the sixth step's
    # boundary, inside its update: the skipped update ended its step as an update does (a
    # merged step would have taken a seventh iteration into the chunk).
    assert (len(loop.losses), loop.iterations, len(chunk.steps)) == (6, 5, 4)
    # The losses are the script's, not the scaler's 65536-fold (or halved after the skip).
    assert [r[2] for r in chunk.steps] == pytest.approx(loop.losses[2:6], rel=1e-6)


@pytest.mark.parametrize(("allocations", "device"), [(0, "cpu"), (3, "cuda")])
def test_the_ready_report_says_whether_the_script_is_on_a_gpu_and_caps_its_memory_there(
    monkeypatch: pytest.MonkeyPatch, allocations: int, device: str
) -> None:
    # A GPU machine with CUDA initialized; only an allocation makes the script a GPU job.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(
        torch.cuda, "memory_stats", lambda index=None: {"allocation.all.allocated": allocations}
    )
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 0)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i: SimpleNamespace(total_memory=80 * 2**30)
    )
    fractions: list[tuple[float, int]] = []
    monkeypatch.setattr(
        torch.cuda, "set_per_process_memory_fraction", lambda f, i: fractions.append((f, i))
    )
    channel = ScriptedChannel([DriverStop()])
    drive(Loop(), 10, channel, device_memory_cap_bytes=20 * 2**30)  # --max-memory 20GiB
    (ready,) = channel.sent
    assert isinstance(ready, ScriptReady) and ready.device == device
    assert fractions == ([(0.25, 0)] if device == "cuda" else [])


def test_a_parked_script_leaves_the_gpu_and_trains_on_unchanged() -> None:
    """`DriverPark`: the optimizer's parameters, gradients and state, and the buffers of the
    modules it trains, leave the (fake) GPU at the boundary, the freed blocks go back, and
    the script trains on as if never parked."""
    from fake_gpu import FakeCuda, FakeGpu
    from torchdoctor.collect import DriverPark, Parked

    cuda = FakeCuda(FakeGpu(2**20))

    class GpuLoop(Loop):
        """`Loop` with Adam, its state on the device (as a GPU's step allocates it)."""

        def __init__(self) -> None:
            super().__init__()
            self.opt = torch.optim.Adam(self.model.parameters(), lr=0.1)
            self.model.register_buffer("running", torch.zeros(4))  # BatchNorm-like

        def on_device(self) -> int:
            for p in self.model.parameters():
                p.data = cuda.to_device(p.data) if not cuda.on_device(p.data) else p.data
                if p.grad is not None:
                    cuda.adopt(p.grad)
            for state in self.opt.state.values():
                cuda.adopt(state["exp_avg"])
                cuda.adopt(state["exp_avg_sq"])
            self.model.running = cuda.to_device(self.model.running)
            return cuda.allocated()

    loop = GpuLoop()
    held: list[int] = []
    commands = [DriverPark(True), DriverPark(False), DriverRun(3), DriverStop()]
    # At the ready boundary the script's state is where a GPU's first steps put it.
    channel = ScriptedChannel(commands, on_recv=lambda: held or held.append(loop.on_device()))
    drive(loop, 100, channel, mover=cuda)
    twin = GpuLoop()  # seeded as the loop was: the same batches, never parked
    drive(twin, 100, ScriptedChannel([DriverRun(3), DriverStop()]))
    _, off, back, chunk = channel.sent
    state = 3 * 4 * sum(p.numel() for p in loop.model.parameters())  # weight, grad, 2 moments
    state += 4 * sum(p.numel() for p in loop.model.parameters()) + 4 * 4  # and the buffer
    assert isinstance(off, Parked) and off.moved_bytes == held[0] == state
    assert off.left_bytes == 0 and off.pinned is None
    assert isinstance(back, Parked) and back.moved_bytes == back.left_bytes == state
    assert isinstance(chunk, ScriptChunk)
    assert [r[2] for r in chunk.steps] == pytest.approx([s[0] for s in twin.losses[2:5]])
