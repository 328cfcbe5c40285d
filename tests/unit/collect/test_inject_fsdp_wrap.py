"""The unit of wrapping and activation checkpointing on a 2-rank gloo FSDP2 job
(tests/sharded_job.py). A script that shards its root only gets each of its repeated blocks
sharded first (fsdp_wrap=block): one FSDP unit becomes one per block plus the root, trained to
the same losses, and the record says where; a script that shards its blocks itself, or a
module with nothing repeated, or a call that shards a list of modules, records why it did
not act. The checkpointing knob on a model
sharded per block recomputes each block in backward, to the same losses (no change was needed
for it: FSDP's hooks run around the block's call, the checkpointed forward inside it, and
backward's recomputation runs on the parameters FSDP gathers again before the block's
backward)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from sharded_job import batch, blocks_model, shard, spawn_ranks, train_step
from torchdoctor.collect.inject import Injection
from torchdoctor.collect.inject.fsdp import GROUPED, NO_BLOCKS, PER_BLOCK
from torchdoctor.knobs import CHECKPOINTING, FSDP_PREFETCH, FSDP_WRAP, RESHARD_AFTER_FORWARD

# Two gloo ranks spawned for every test: a process-launching check, in the untimed studies
# (it asserts behaviour, no timing) so that the fast tier stays fast.
pytestmark = [
    pytest.mark.skipif(
        not torch.distributed.is_available(), reason="this torch build has no torch.distributed"
    ),
    pytest.mark.study,
    pytest.mark.untimed,
]

#: Blocks of the stack: more than one, so prefetching has a next block.
DEPTH = 3
STEPS = 3


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 16)
        self.down = nn.Linear(16, 8)
        self.calls = 0  # forwards run, recomputations included

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x + self.down(torch.relu(self.up(x)))


class Stack(nn.Module):
    """A transformer's shape: an input layer, `layers` (a ModuleList of one class), a head."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.inp = nn.Linear(8, 8)
        self.layers = nn.ModuleList(Block() for _ in range(DEPTH))
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def _units(model: nn.Module) -> int:
    from torch.distributed.fsdp import FSDPModule

    return sum(isinstance(m, FSDPModule) for m in model.modules())


def _train(model: nn.Module, rank: int) -> list[float]:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return [train_step(model, optimizer, batch(i, rank)) for i in range(STEPS)]


def _root_only(recipe: dict[str, Any] | None) -> tuple[nn.Module, list[float], Any]:
    """The script's root-only wrapping, under the recipe (None: as written)."""
    injection = Injection(recipe, device="cpu").install() if recipe else None
    try:
        from torch.distributed.fsdp import fully_shard  # the script imports it once started

        model = Stack()
        fully_shard(model)
        losses = _train(model, torch.distributed.get_rank())
    finally:
        if injection is not None:
            injection.uninstall()
    return model, losses, injection.record().to_json_dict() if injection else None


def _wrap_run() -> dict[str, Any]:
    own, own_losses, _ = _root_only(None)
    recipe = {FSDP_WRAP.name: "block", FSDP_PREFETCH.name: 1, RESHARD_AFTER_FORWARD.name: False}
    wrapped, losses, record = _root_only(recipe)
    prefetch = [
        [id(s) for s in layer._get_fsdp_state()._states_to_forward_prefetch]
        for layer in wrapped.layers
    ]
    states = [id(layer._get_fsdp_state()) for layer in wrapped.layers]
    # a script that shards its blocks itself, and a module with nothing repeated
    per_block = Injection({FSDP_WRAP.name: "block"}, device="cpu").install()
    try:
        shard(blocks_model())
    finally:
        per_block.uninstall()
    lone = Injection({FSDP_WRAP.name: "block"}, device="cpu").install()
    try:
        from torch.distributed.fsdp import fully_shard

        fully_shard(nn.Linear(8, 4))
    finally:
        lone.uninstall()
    grouped = Injection({FSDP_WRAP.name: "block"}, device="cpu").install()
    try:
        from torch.distributed.fsdp import fully_shard

        fully_shard([Stack().layers[0], Stack().layers[1]])  # one unit of two modules
    finally:
        grouped.uninstall()
    return {
        "units": (_units(own), _units(wrapped)),
        "losses": (own_losses, losses),
        "record": record,
        "prefetch": prefetch,
        "states": states,
        "per_block": per_block.record().to_json_dict(),
        "lone": lone.record().to_json_dict(),
        "grouped": grouped.record().to_json_dict(),
    }


def _rank(rank: int, out: str) -> None:
    """Both runs in one job: starting the two ranks is most of the test's time."""
    seen = {"wrap": _wrap_run(), "checkpoint": _checkpoint_run(rank)}
    if rank == 0:
        torch.save(seen, out)


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = str(tmp_path_factory.mktemp("fsdp_wrap") / "rank0.pt")
    spawn_ranks(_rank, out)
    return dict(torch.load(out))


def test_fsdp_wrap_shards_each_block_before_a_root_only_call(seen: dict[str, Any]) -> None:
    seen = seen["wrap"]
    assert seen["units"] == (1, DEPTH + 1)  # the root alone; each block, then the root
    # the same parameters sharded in smaller groups: each gradient element is the same sum
    # of the two ranks' in fp32, so the training is the script's own
    own, wrapped = seen["losses"]
    assert torch.allclose(torch.tensor(own), torch.tensor(wrapped), rtol=1e-6, atol=0.0)
    outcomes = {k["knob"]: k for k in seen["record"]["knobs"]}
    assert {k: o["status"] for k, o in outcomes.items()} == {
        FSDP_WRAP.name: "applied",
        FSDP_PREFETCH.name: "applied",
        RESHARD_AFTER_FORWARD.name: "applied",
    }
    [at] = outcomes[FSDP_WRAP.name]["applied_at"]
    what = f"fully_shard(model.layers[i]) for {DEPTH} Block blocks, before the root's"
    assert at.startswith(f"{what} at ")
    assert "test_inject_fsdp_wrap.py" in at
    # the blocks the wrap made are blocks to the other knobs: resharding set on each, the
    # root's left as FSDP's; each prefetches the next
    assert outcomes[RESHARD_AFTER_FORWARD.name]["applied_count"] == DEPTH
    _, second, third = seen["states"]
    assert seen["prefetch"] == [[second], [third], []]
    [per_block] = seen["per_block"]["knobs"]
    assert (per_block["status"], per_block["reason"]) == ("not_applied", PER_BLOCK)
    [lone] = seen["lone"]["knobs"]
    assert (lone["status"], lone["reason"]) == ("not_applied", NO_BLOCKS.format("Linear"))
    [grouped] = seen["grouped"]["knobs"]
    assert (grouped["status"], grouped["reason"]) == ("not_applied", GROUPED)


def _checkpoint_run(rank: int) -> dict[bool, Any]:
    runs = {}
    for checkpointed in (False, True):
        injection = Injection({CHECKPOINTING.name: checkpointed}, device="cpu").install()
        try:
            from torch.distributed.fsdp import fully_shard

            model = Stack()
            for layer in model.layers:
                fully_shard(layer)
            fully_shard(model)
            losses = _train(model, rank)
        finally:
            injection.uninstall()
        calls = [layer.calls for layer in model.layers]
        runs[checkpointed] = (losses, calls, injection.record().to_json_dict())
    return runs


def test_checkpointing_recomputes_each_block_of_an_fsdp2_model(seen: dict[str, Any]) -> None:
    runs = seen["checkpoint"]
    own_losses, own_calls, _ = runs[False]
    losses, calls, record = runs[True]
    assert own_calls == [STEPS] * DEPTH  # one forward per step
    assert calls == [2 * STEPS] * DEPTH  # and its recomputation in backward
    [outcome] = record["knobs"]
    assert outcome["status"] == "applied", outcome
    assert f"{DEPTH} " in outcome["applied_at"][0]
    # recomputation replays the same forward on the same gathered parameters
    assert torch.allclose(torch.tensor(own_losses), torch.tensor(losses), rtol=1e-6, atol=0.0)
