"""FSDP knobs injected where an unmodified script calls `fully_shard`: on a 2-rank gloo job
(tests/sharded_job.py) the blocks keep their gathered parameters after forward
(reshard_after_forward=false) while the root's call is left as written, forward runs in bf16
(fsdp_mixed_precision), each block prefetches the next (fsdp_prefetch), and the record says
where each acted. A script that shards nothing records why each knob did not act."""

from __future__ import annotations

import pytest
import torch

from sharded_job import batch, blocks_model, shard, spawn_ranks, train_step
from torchdoctor.collect.inject import Injection
from torchdoctor.collect.inject.fsdp import NO_FULLY_SHARD, ONE_BLOCK
from torchdoctor.knobs import FSDP_MIXED_PRECISION, FSDP_PREFETCH, RESHARD_AFTER_FORWARD

# Two gloo ranks spawned for every test: a process-launching check, in the untimed studies
# (it asserts behaviour, no timing) so that the fast tier stays fast.
pytestmark = [
    pytest.mark.skipif(
        not torch.distributed.is_available(), reason="this torch build has no torch.distributed"
    ),
    pytest.mark.study,
    pytest.mark.untimed,
]

RECIPE = {
    RESHARD_AFTER_FORWARD.name: False,
    FSDP_MIXED_PRECISION.name: "bf16_fp32_reduce",
    FSDP_PREFETCH.name: 1,
}


def _injected_rank(rank: int, out: str) -> None:
    import torch.distributed.fsdp as fsdp
    from torch.distributed.tensor import DTensor

    original = fsdp.fully_shard
    injection = Injection(RECIPE, device="cpu").install()
    try:
        model = shard(blocks_model())
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        train_step(model, optimizer, batch(0, rank))
        # After forward, before backward: what each block holds.
        output = model(batch(1, rank))
        gathered = [not any(isinstance(p, DTensor) for p in block.parameters()) for block in model]
        output.float().sum().backward()
        prefetch = [
            [id(s) for s in block._get_fsdp_state()._states_to_forward_prefetch] for block in model
        ]
        states = [id(block._get_fsdp_state()) for block in model]
        losses = [train_step(model, optimizer, batch(2 + i, rank)) for i in range(2)]
    finally:
        injection.uninstall()
    # FSDP's own for a block is to reshard: asking for it again changes nothing
    again = Injection({RESHARD_AFTER_FORWARD.name: True}, device="cpu").install()
    try:
        shard(blocks_model())
    finally:
        again.uninstall()
    if rank == 0:
        torch.save(
            {
                "record": injection.record().to_json_dict(),
                "output_dtype": str(output.dtype),
                "gathered": gathered,
                "prefetch": prefetch,
                "states": states,
                "losses": losses,
                "restored": fsdp.fully_shard is original,
                "again": again.record().to_json_dict(),
            },
            out,
        )


def test_fsdp_knobs_act_at_fully_shard_on_a_two_rank_job(tmp_path) -> None:
    out = str(tmp_path / "rank0.pt")
    spawn_ranks(_injected_rank, out)
    seen = torch.load(out)
    outcomes = {k["knob"]: k for k in seen["record"]["knobs"]}
    assert {k: o["status"] for k, o in outcomes.items()} == dict.fromkeys(RECIPE, "applied")
    # the three blocks took reshard_after_forward, the root's call was left as written
    assert outcomes[RESHARD_AFTER_FORWARD.name]["applied_count"] == 3
    assert outcomes[FSDP_MIXED_PRECISION.name]["applied_count"] == 4
    assert all("sharded_job.py" in at for at in outcomes[RESHARD_AFTER_FORWARD.name]["applied_at"])
    assert seen["gathered"] == [True, True, True]  # FSDP's own would reshard every block
    assert seen["output_dtype"] == "torch.bfloat16"
    # each block prefetches the next one's all-gather, the last none
    _, second, third = seen["states"]
    assert seen["prefetch"] == [[second], [third], []]
    assert all(torch.isfinite(torch.tensor(seen["losses"])))
    assert seen["restored"]
    [own] = seen["again"]["knobs"]
    assert own["status"] == "not_applied"
    assert "already runs with reshard_after_forward=True" in own["reason"]


def test_a_script_that_shards_nothing_records_why_no_fsdp_knob_acted() -> None:
    injection = Injection(RECIPE, device="cpu").install()
    try:
        model = blocks_model()
        model(batch(0, 0)).sum().backward()
    finally:
        injection.uninstall()
    reasons = {k.knob: k.reason for k in injection.record().knobs if k.status == "not_applied"}
    assert reasons == {
        RESHARD_AFTER_FORWARD.name: NO_FULLY_SHARD,
        FSDP_MIXED_PRECISION.name: NO_FULLY_SHARD,
        FSDP_PREFETCH.name: ONE_BLOCK,
    }
