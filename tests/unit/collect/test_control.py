"""StepController: a real training loop in this process, driven through a scripted channel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from torchdoctor.collect.control import StepController, read_losses
from torchdoctor.collect.hooks import CollectConfig, Instrumentation, StopCollection


class ScriptedChannel:
    """Answers each recv with the next command; EOF once they run out (the tuner is gone).

    `on_recv` runs before each answer (a test's fake clock moves while the script waits)."""

    def __init__(self, commands: list[dict[str, Any]], on_recv: Callable[[], None] = lambda: None):
        self.commands = list(commands)
        self.sent: list[dict[str, Any]] = []
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

    def __init__(self, *, loader: bool = False, accumulate: int = 1) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Linear(4, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.loader = loader
        self.accumulate = accumulate
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
            self.opt.zero_grad()
            self.steps_done += 1


def drive(
    loop: Loop, steps: int, channel: ScriptedChannel, clock: Callable[[], float] | None = None
) -> tuple[StepController, str]:
    """Run `loop` instrumented and controlled, as the bootstrap does; returns how it ended."""
    inst = Instrumentation(CollectConfig(warmup=0, profile_steps=0, cuda_events=False))
    kwargs = {"clock": clock} if clock is not None else {}
    controller = StepController(channel, inst.recorder, uncounted=inst.syncs.uncounted, **kwargs)
    inst.add_probe(controller)
    ended_by = "completed"
    inst.install()
    try:
        loop.run(steps)
    except StopCollection:
        ended_by = "max_steps"
    finally:
        inst.uninstall()
    controller.finish(ended_by, 0, None)
    return controller, ended_by


def test_runs_exactly_the_steps_asked_then_exit_unwinds() -> None:
    loop = Loop()
    channel = ScriptedChannel(
        [{"op": "run", "steps": 3}, {"op": "run", "steps": 2}, {"op": "exit"}]
    )
    controller, ended_by = drive(loop, 100, channel)
    assert ended_by == "max_steps"
    # The first step is start-up (it ends at the ready boundary), then 3 + 2; exit is raised
    # at the 6th step's boundary, inside its optimizer step.
    assert loop.steps_done == 5
    assert len(loop.losses) == 6
    ready, first, second = channel.sent
    assert ready["event"] == "ready" and ready["startup_s"] >= 0
    assert [len(first["steps"]), len(second["steps"])] == [3, 2]
    for row in first["steps"] + second["steps"]:
        assert len(row) == 3 and row[0] > 0 and row[1] is None
    # The loss is the value of the tensor backward() was called on, in that step.
    got = [r[2] for r in first["steps"] + second["steps"]]
    assert got == pytest.approx([s[0] for s in loop.losses[1:6]], rel=0, abs=0)
    assert first["peak_memory_bytes"] > 0
    assert controller.stopping and channel.closed


def test_script_ending_mid_chunk_reports_what_ran_and_ended() -> None:
    loop = Loop()
    channel = ScriptedChannel([{"op": "run", "steps": 10}])
    _, ended_by = drive(loop, 4, channel)
    assert ended_by == "completed"
    ready, reply = channel.sent
    assert ready["event"] == "ready"
    assert reply["ok"] and reply["ended"] is True
    assert len(reply["steps"]) == 3  # steps 2..4; step 1 was start-up
    assert [r[2] for r in reply["steps"]] == [s[0] for s in loop.losses[1:]]


def test_script_ending_before_its_first_optimizer_step_is_an_error() -> None:
    channel = ScriptedChannel([{"op": "run", "steps": 2}])
    inst = Instrumentation(CollectConfig(warmup=0, profile_steps=0, cuda_events=False))
    controller = StepController(channel, inst.recorder, uncounted=inst.syncs.uncounted)
    inst.add_probe(controller)
    with inst:
        model = torch.nn.Linear(4, 1)
        for _ in range(3):  # hand-written SGD: backward, no torch.optim step
            model(torch.randn(2, 4)).sum().backward()
    controller.finish("completed", 0, None)
    (reply,) = channel.sent
    assert reply["ok"] is False and reply["ended"] is True
    assert "never steps a torch.optim optimizer" in reply["reason"]


def test_samples_from_the_data_loader_and_accumulated_losses_averaged() -> None:
    loop = Loop(loader=True, accumulate=2)
    channel = ScriptedChannel([{"op": "run", "steps": 2}])
    drive(loop, 10, channel)
    rows = channel.sent[1]["steps"]
    assert [r[1] for r in rows] == [4, 4]
    expected = [sum(s) / 2 for s in loop.losses[1:3]]
    assert [r[2] for r in rows] == pytest.approx(expected, rel=1e-6)


def test_waiting_for_a_command_is_no_steps_time() -> None:
    now = [0.0]
    loop = Loop()

    def step_takes_a_second() -> None:
        now[0] += 1.0

    def the_tuner_takes_a_minute() -> None:
        now[0] += 60.0

    loop.tick = step_takes_a_second
    channel = ScriptedChannel(
        [{"op": "run", "steps": 2}, {"op": "run", "steps": 2}], on_recv=the_tuner_takes_a_minute
    )
    drive(loop, 100, channel, clock=lambda: now[0])
    assert [r[0] for r in channel.sent[1]["steps"] + channel.sent[2]["steps"]] == [1.0] * 4


def test_bad_command_is_answered_and_the_script_keeps_waiting() -> None:
    loop = Loop()
    channel = ScriptedChannel([{"op": "run", "steps": 0}, {"op": "frobnicate"}, {"op": "exit"}])
    _, ended_by = drive(loop, 100, channel)
    assert ended_by == "max_steps"
    assert [m.get("ok") for m in channel.sent[1:]] == [False, False]
    assert loop.steps_done == 0  # stopped at the first boundary, inside the first step


def test_read_losses_means_per_step_and_drops_non_finite() -> None:
    steps = [[torch.tensor(1.0), torch.tensor(3.0)], [], [torch.tensor(float("nan"))]]
    assert read_losses(steps) == [2.0, None, None]
