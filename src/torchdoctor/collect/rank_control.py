"""A torchrun job driven as one script: rank 0 talks to the tuner, every rank follows it.

`torchdoctor tune -- torchrun --nproc_per_node 2 train.py` drives the whole job as one arm.
The tuner's side is unchanged (`procs.ScriptWorker`, one control connection): only rank 0
connects to it (`attach_rank_controller`); the launcher process (torchrun itself, which trains
nothing) does not. Why one connection rather than one per rank: the driver's protocol is one
request, one reply; with one connection the tuner needs no notion of ranks, and the ranks stay
in step through the job's own process group, which DDP keeps them in anyway.

What every rank does at the points where a single script would talk to the tuner, all of
them reached by every rank in the same order (each rank passes the same step boundaries, one
per optimizer step, since DDP steps every rank together):

- ready boundary: the ranks gather their recipe's record (knob -> status and value,
  `recipe_view`) and rank 0's device memory cap (`all_gather_object`); ranks that disagree on
  the recipe end the launch with one line (`disagreement`), which ends the tune with exit 2
  whichever arm shows it (bad input: the ranks build different objects). Otherwise rank 0
  sends `ScriptReady`.
- each command: rank 0 receives it from the tuner and broadcasts it to the others
  (`broadcast_object_list`), so a run, release or stop acts on every rank.
- each chunk's end: the ranks gather their rows (`all_gather` of one tensor, after the last
  step's time is taken, so the gather is in no row). The job's step time at each boundary is
  the slowest rank's (the maximum), its samples the sum over ranks, its peak memory the
  largest rank's; the losses are rank 0's, which every arm has alike. The maximum is the job's
  pace: DDP's all-reduce makes the others wait for the slowest rank inside the step, and what
  a rank does after the last all-reduce (its optimizer step, its next batch) is paid before
  the next step's all-reduce. It is the rule `scale/` uses for a job's step.

The collectives run over the job's default group when it is gloo (a CPU job), else over a
gloo group of the same ranks made at the ready boundary (`dist.new_group`), so a command never
queues behind the job's NCCL work nor needs a device. A script that has not initialized
torch.distributed by its ready boundary cannot be driven as a job and says so.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from torchdoctor.collect._channel import DriverStop, Row, ScriptChunk, ScriptError
from torchdoctor.collect.control import (
    CONTROL_AUTHKEY_ENV,
    Channel,
    StepController,
    attach_controller,
    compose,
    seed_everything,
)
from torchdoctor.collect.hooks import StopCollection
from torchdoctor.collect.rank_agreement import disagreement, recipe_view
from torchdoctor.core.rank import RankIdentity

#: The peak-memory slot of a gathered row when a rank has no figure.
_NO_PEAK = -1.0


def combine_rows(gathered: list[list[float]], losses: list[float | None]) -> list[Row]:
    """The job's rows from each rank's `[seconds..., samples...]` (samples -1: unknown): the
    slowest rank's seconds, the samples of all ranks, rank 0's losses."""
    n = len(losses)
    rows: list[Row] = []
    for i in range(n):
        seconds = max(rank[i] for rank in gathered)
        counts = [rank[n + i] for rank in gathered]
        samples = None if any(c < 0 for c in counts) else int(sum(counts))
        rows.append((seconds, samples, losses[i]))
    return rows


class RankController(StepController):
    """One rank's controller (module docstring): rank 0 holds the tuner's connection (`conn`),
    the others None."""

    def __init__(self, conn: Channel | None, recorder: Any, **kwargs: Any) -> None:
        super().__init__(conn if conn is not None else _NoChannel(), recorder, **kwargs)
        self.rank = int(RankIdentity.from_env().rank or 0)
        self.group: Any = None

    # ---- the job's collectives -------------------------------------------------------------

    def _collectives(self) -> Any:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            return None
        if self.group is None:
            if dist.get_backend() == "gloo":
                self.group = dist.group.WORLD
            else:
                self.group = dist.new_group(backend="gloo")
        return dist

    def _send_ready(self) -> None:
        dist = self._collectives()
        if dist is None:
            reason = (
                "under torchrun the ranks are driven through the job's process group, and this "
                "script has not called torch.distributed.init_process_group by its second step"
            )
            self._send(ScriptError(reason, ended=True))
            self.stopping = True
            raise StopCollection(reason)
        mine = (recipe_view(self._injection_record()), self.device_memory_cap_bytes)
        gathered: list[Any] = [None] * dist.get_world_size(self.group)
        dist.all_gather_object(gathered, mine, group=self.group)
        self.device_memory_cap_bytes = gathered[0][1]
        differ = disagreement([g[0] for g in gathered])
        if differ is not None:
            self._send(ScriptError(differ, ended=True, ranks_disagree=True))
            self.stopping = True
            raise StopCollection(differ)
        super()._send_ready()

    def _next_command(self) -> object:
        message = super()._next_command() if self.rank == 0 else None
        dist = self._collectives()
        if dist is None:  # the job's group is gone: nothing to follow
            return message if message is not None else DriverStop()
        box = [message]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def _chunk_reply(
        self, values: list[float | None], *, ended: bool = False, exit_code: int | None = None
    ) -> ScriptChunk:
        reply = super()._chunk_reply(values, ended=ended, exit_code=exit_code)
        dist = None if ended else self._collectives()
        if dist is None:
            # The job ends (its group may be gone already): rank 0's own rows.
            return reply
        n = len(self._seconds)
        samples = [float(-1 if s is None else s) for s in self._samples[:n]]
        mine = torch.tensor(
            [*self._seconds, *samples, float(reply.peak_memory_bytes or _NO_PEAK)],
            dtype=torch.float64,
        )
        parts = [torch.empty_like(mine) for _ in range(dist.get_world_size(self.group))]
        dist.all_gather(parts, mine, group=self.group)
        gathered = [p.tolist() for p in parts]
        rows = combine_rows([g[: 2 * n] for g in gathered], [r[2] for r in reply.steps])
        peaks = [g[-1] for g in gathered if g[-1] >= 0]
        peak = int(max(peaks)) if peaks else None
        return ScriptChunk(rows, peak, ended=reply.ended, exit_code=reply.exit_code)

    def _send(self, message: object) -> None:
        if self.rank == 0:
            super()._send(message)


class _NoChannel:
    """A rank other than 0 talks to no tuner: its commands come from rank 0."""

    def send(self, obj: Any) -> None:
        pass

    def recv(self) -> Any:
        return DriverStop()

    def close(self) -> None:
        pass


def attach_rank_controller(address: str, inst: Any, *, seed: int | None) -> StepController:
    """This rank's controller, composed with `inst`: rank 0 connects to the tuner at `address`
    (`attach_controller`); another rank seeds with `seed`, as the tuner seeds rank 0, and
    follows rank 0. Raises `ControlError` (rank 0 cannot reach the tuner)."""
    rank = int(RankIdentity.from_env().rank or 0)
    if rank == 0:
        return attach_controller(address, inst, controller_type=RankController)
    os.environ.pop(CONTROL_AUTHKEY_ENV, None)  # the script never sees the key
    if seed is not None:
        seed_everything(int(seed))
    controller = RankController(None, inst.recorder, uncounted=inst.syncs.uncounted, seed=seed)
    return compose(controller, inst)
