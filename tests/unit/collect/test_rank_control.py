"""RankController: a torchrun job driven as one script (collect/rank_control.py).

Rank 0 runs a real training loop in this process, driven through a scripted channel; the other
rank is played by a fake of the torch.distributed calls the controller makes (the job's
collectives), so what rank 0 broadcasts and what it makes of the other rank's rows is seen
without starting a job (a real 2-rank job: tests/integration/test_tune_torchrun.py).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from test_control import Loop, ScriptedChannel, run_controlled

from torchdoctor.collect import DriverRun, DriverStop, ScriptChunk, ScriptError, ScriptReady
from torchdoctor.collect._target import LaunchConfig, launches_ranks
from torchdoctor.collect.hooks import CollectConfig, Instrumentation, StopCollection
from torchdoctor.collect.rank_agreement import recipe_view
from torchdoctor.collect.rank_control import RankController, combine_rows


class OtherRank:
    """The collectives as rank 0 (or rank 1) sees them, with the other rank's part scripted.

    `view`: the other rank's recipe view at the ready boundary; `other_seconds`: each of its
    step times; `commands`: what rank 0 broadcasts, for a controller that is
    not rank 0."""

    def __init__(
        self,
        *,
        view: list[Any] | None = None,
        other_seconds: float = 7.0,
        commands: list[object] | None = None,
    ) -> None:
        self.view = view
        self.other_seconds = other_seconds
        self.commands = list(commands or [])
        self.broadcast: list[object] = []
        self.gathers = 0

    def get_world_size(self, group: Any = None) -> int:
        return 2

    def all_gather_object(self, out: list[Any], obj: Any, group: Any = None) -> None:
        other = obj if self.view is None else (self.view, obj[1])
        out[:] = [obj, other]

    def broadcast_object_list(self, box: list[Any], src: int = 0, group: Any = None) -> None:
        if box[0] is None:  # not rank 0: receive
            box[0] = self.commands.pop(0) if self.commands else DriverStop()
        self.broadcast.append(box[0])

    def all_gather(self, parts: list[torch.Tensor], tensor: torch.Tensor, group: Any) -> None:
        self.gathers += 1
        n = (tensor.numel() - 1) // 2
        other = tensor.clone()
        other[:n] = self.other_seconds
        parts[0].copy_(tensor)
        parts[1].copy_(other)


def drive_rank(
    loop: Any,
    steps: int,
    channel: Any,
    dist: OtherRank,
    monkeypatch: pytest.MonkeyPatch,
    *,
    rank: int = 0,
    recipe: dict[str, Any] | None = None,
) -> tuple[RankController, str]:
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setattr(RankController, "_collectives", lambda self: dist)
    inst = Instrumentation(CollectConfig(warmup=0, profile_steps=0, cuda_events=False))
    controller = RankController(
        channel if rank == 0 else None, inst.recorder, uncounted=inst.syncs.uncounted
    )
    return run_controlled(inst, controller, loop, steps, recipe)


def test_rank_0_relays_every_command_and_reports_the_slowest_ranks_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = Loop(loader=True)
    channel = ScriptedChannel([DriverRun(3), DriverRun(2), DriverStop()])
    dist = OtherRank(other_seconds=7.0)
    controller, ended_by = drive_rank(loop, 100, channel, dist, monkeypatch)
    assert ended_by == "max_steps" and controller.stopping
    # every command the tuner sent reached the other rank, in order
    assert [type(m).__name__ for m in dist.broadcast] == ["DriverRun", "DriverRun", "DriverStop"]
    ready, first, second = channel.sent
    assert isinstance(ready, ScriptReady)
    assert isinstance(first, ScriptChunk) and isinstance(second, ScriptChunk)
    assert [len(first.steps), len(second.steps)] == [3, 2]
    assert dist.gathers == 2  # one gather per chunk, none per step
    for seconds, samples, loss in first.steps + second.steps:
        # the other rank took 7 s a step: the job's step is the slowest rank's
        assert seconds == 7.0
        assert samples == 8  # the loader's batch of 4 on each of the 2 ranks
        assert loss is not None
    assert [r[2] for r in first.steps + second.steps] == pytest.approx(
        [s[0] for s in loop.losses[2:7]], rel=0, abs=0
    )  # rank 0's own losses


def test_the_job_row_is_the_max_seconds_and_the_summed_samples() -> None:
    rows = combine_rows([[0.1, 0.3, 4.0, 4.0], [0.2, 0.1, 4.0, -1.0]], [1.0, 2.0])
    assert rows == [(0.2, 8, 1.0), (0.3, None, 2.0)]


def test_a_rank_other_than_0_follows_the_broadcast_and_sends_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = Loop()
    dist = OtherRank(commands=[DriverRun(3), DriverRun(1), DriverStop()])
    controller, ended_by = drive_rank(loop, 100, None, dist, monkeypatch, rank=1)
    assert ended_by == "max_steps" and controller.rank == 1
    # 2 start-up steps, 3 + 1 driven, the stop raised inside the 6th step's optimizer step
    assert loop.steps_done == 5
    assert dist.gathers == 2


def test_ranks_that_disagree_on_the_recipe_end_the_launch_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = Loop(loader=True)
    channel = ScriptedChannel([DriverRun(3)])
    # rank 1 built no DataLoader: its num_workers never applied
    other = [("num_workers", 2, "not_applied")]
    dist = OtherRank(view=other)
    controller, ended_by = drive_rank(
        loop, 100, channel, dist, monkeypatch, recipe={"num_workers": 2}
    )
    assert ended_by == "max_steps" and controller.stopping
    [error] = channel.sent
    assert isinstance(error, ScriptError) and error.ended and error.ranks_disagree
    assert "disagree on the recipe" in error.reason and "\n" not in error.reason
    assert "rank 0 has num_workers=2 applied" in error.reason
    assert "rank 1 num_workers=2 not applied" in error.reason
    assert loop.steps_done == 1  # stopped at the ready boundary, in the second step
    assert dist.broadcast == []  # no command was ever relayed


def test_ranks_with_one_recipe_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = Loop(loader=True)
    channel = ScriptedChannel([DriverStop()])
    dist = OtherRank()  # the other rank's view is rank 0's own
    drive_rank(loop, 100, channel, dist, monkeypatch, recipe={"num_workers": 2})
    ready = channel.sent[0]
    assert isinstance(ready, ScriptReady)
    assert recipe_view(ready.injection) == [("num_workers", 2, "applied")]


def test_a_script_without_a_process_group_cannot_be_driven_as_a_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setattr(RankController, "_collectives", lambda self: None)
    loop = Loop()
    channel = ScriptedChannel([DriverRun(3)])
    inst = Instrumentation(CollectConfig(warmup=0, profile_steps=0, cuda_events=False))
    controller = RankController(channel, inst.recorder, uncounted=inst.syncs.uncounted)
    inst.add_probe(controller)
    inst.install()
    try:
        with pytest.raises(StopCollection):
            loop.run(100)
    finally:
        inst.uninstall()
    [error] = channel.sent
    assert isinstance(error, ScriptError) and "init_process_group" in error.reason


def test_under_torchrun_the_launcher_process_leaves_the_driving_to_the_ranks() -> None:
    cfg = LaunchConfig(out_dir=".", module=True, control="127.0.0.1:1")
    assert launches_ranks(cfg, ["torch.distributed.run", "--nproc_per_node", "2", "t.py"])
    assert not launches_ranks(cfg, ["pkg.train"])
    script = LaunchConfig(out_dir=".", module=False, control="127.0.0.1:1")
    assert not launches_ranks(script, ["torch.distributed.run"])  # a file of that name
