"""Memory per rank under FSDP2 by arithmetic: each owner on shapes whose shards are worked out
by hand (padding to N rows included), the peak's two moments and the largest batch."""

from __future__ import annotations

import pytest

from torchdoctor.analyze.shard_memory import (
    max_batch_per_rank,
    optimizer_state_bytes,
    plan_shards,
    rank_memory,
    sharded_bytes,
    unsharded_bytes,
)
from torchdoctor.core.errors import UsageError
from torchdoctor.core.memory_owners import LinearFit
from torchdoctor.core.shard_memory import ModelShape, ShardedParameter, ShardPlan, ShardUnit


def _block(name: str) -> ShardUnit:
    # a Linear(10 -> 6): weight 6 x 10, bias 6
    return ShardUnit(
        name=name,
        parameters=[
            ShardedParameter(name="weight", rows=6, numel=60),
            ShardedParameter(name="bias", rows=6, numel=6),
        ],
    )


def _shape(optimizer: str = "AdamW", states: int = 2, scalars: int = 1) -> ModelShape:
    root = ShardUnit(name="", parameters=[ShardedParameter(name="emb", rows=5, numel=20)])
    return ModelShape(
        units=[_block("blocks.0"), _block("blocks.1"), root],
        parameter_bytes=4,
        buffers_bytes=100,
        optimizer=optimizer,
        states_per_element=states,
        state_bytes=4,
        scalar_states_per_parameter=scalars,
    )


ACTS = LinearFit(fixed_bytes=1000.0, per_sample_bytes=500.0, residual_bytes=0.0, batch_sizes=[1, 2])


def test_shards_are_padded_to_n_rows() -> None:
    shape = _shape()
    # N=4: weight ceil(6/4)=2 rows x 10, bias 2, emb ceil(5/4)=2 rows x 4
    assert shape.units[0].shard_numel(4) == 22
    assert shape.units[2].shard_numel(4) == 8
    assert sharded_bytes(shape, 4) == (22 + 22 + 8) * 4
    assert sharded_bytes(shape, 1) == shape.numel * 4 == 152 * 4


def test_optimizer_state_by_kind() -> None:
    # AdamW: two moments of the shard, and a 4-byte step per parameter tensor (5 of them)
    assert optimizer_state_bytes(_shape(), 4) == 2 * 52 * 4 + 5 * 4
    # SGD with momentum: one buffer, no scalar
    assert optimizer_state_bytes(_shape("SGD", 1, 0), 4) == 52 * 4
    assert optimizer_state_bytes(_shape("SGD", 0, 0), 4) == 0


def test_unsharded_units_the_root_and_the_largest_in_flight() -> None:
    shape = _shape()
    # N=4: root padded 8 x 4 = 32 elements; a block padded 22 x 4 = 88, twice (one in flight)
    assert unsharded_bytes(shape, 4, param_dtype_bytes=2, prefetch=1) == (32 + 2 * 88) * 2
    assert unsharded_bytes(shape, 4, param_dtype_bytes=2, prefetch=0) == (32 + 88) * 2
    # N=1: nothing is all-gathered, the computing unit counts once whatever the prefetch
    assert unsharded_bytes(shape, 1, param_dtype_bytes=2, prefetch=1) == (20 + 66) * 2


def test_the_peak_is_the_larger_of_the_backward_and_the_optimizer_step() -> None:
    shape = _shape()
    rank = rank_memory(shape, 4, 3, ACTS, param_dtype_bytes=2, prefetch=1)
    resident = 208 + (2 * 52 * 4 + 20) + 100
    assert rank.activations_bytes == 1000 + 3 * 500
    assert rank.backward_peak_bytes == resident + 416 + 2500
    assert rank.optimizer_peak_bytes == resident + 208
    assert rank.peak_bytes == rank.backward_peak_bytes
    lean = LinearFit(fixed_bytes=0.0, per_sample_bytes=1.0, residual_bytes=0.0, batch_sizes=[1, 2])
    # one rank: the whole fp32 gradient (608 B) outweighs the bf16 units gathered (172 B)
    small = rank_memory(shape, 1, 1, lean, param_dtype_bytes=2, prefetch=1)
    assert small.peak_bytes == small.optimizer_peak_bytes > small.backward_peak_bytes


def test_the_largest_batch_is_the_edge_of_the_budget() -> None:
    shape = _shape()
    budget = 20_000
    best = max_batch_per_rank(shape, 4, ACTS, budget, param_dtype_bytes=2)
    at = rank_memory(shape, 4, best, ACTS, param_dtype_bytes=2)
    over = rank_memory(shape, 4, best + 1, ACTS, param_dtype_bytes=2)
    assert at.peak_bytes <= budget < over.peak_bytes
    # more ranks, smaller shards: room for more samples
    assert max_batch_per_rank(shape, 1, ACTS, budget, param_dtype_bytes=2) < best
    assert max_batch_per_rank(shape, 4, ACTS, 500, param_dtype_bytes=2) == 0


def test_a_plan_says_whether_it_fits_at_each_n_and_round_trips() -> None:
    shape = _shape()
    plan = plan_shards(
        "tiny",
        shape,
        ACTS,
        [1, 4],
        param_dtype="bf16",
        param_dtype_bytes=2,
        budget_bytes=3_000,
    )
    assert plan.parameters == 152
    assert plan.max_batch[1] == 0 and plan.fits(1) is False
    assert plan.max_batch[4] >= 1 and plan.fits(4) is True
    assert [r.batch for r in plan.ranks] == [1, plan.max_batch[4]]
    again = ShardPlan.from_json_dict(plan.to_json_dict())
    assert again == plan


def test_no_ranks_is_refused() -> None:
    with pytest.raises(UsageError, match="cannot shard over"):
        plan_shards("tiny", _shape(), ACTS, [0], param_dtype="bf16", param_dtype_bytes=2)


def test_the_backward_binds_where_activations_and_landed_gradients_peak_together() -> None:
    from torchdoctor.analyze.shard_memory import step_moments

    # by batch: the peak's moment first (no gradient yet), then two landings
    found = {
        1: [(1000, 0.0), (900, 0.5), (100, 1.0)],
        2: [(1500, 0.0), (1300, 0.5), (100, 1.0)],
    }
    moments = step_moments(found)
    # the last landing has fewer activations but every gradient: it may still bind; none of
    # the three covers another, so all stay, the peak's first
    assert [m.gradients_done for m in moments] == [0.0, 0.5, 1.0]
    assert moments[0].activations.per_sample_bytes == pytest.approx(500)
    shape = _shape()
    # N=1: the gradient shard is 608 B; at batch 1 the middle moment (900 + 304) binds
    rank = rank_memory(shape, 1, 1, moments, param_dtype_bytes=2)
    assert (rank.activations_bytes, rank.gradients_held_bytes) == (900, 304)
    base = 608 + (2 * 152 * 4 + 20) + 100 + 172
    assert rank.backward_peak_bytes == base + 1204
    best = max_batch_per_rank(shape, 1, moments, base + 1900, param_dtype_bytes=2)
    assert best == 2  # 1500 at the peak, 1300 + 304 in the middle: both under 1900
    assert max_batch_per_rank(shape, 1, moments, base + 1600, param_dtype_bytes=2) == 1


def test_a_moment_another_covers_is_dropped() -> None:
    from torchdoctor.analyze.shard_memory import step_moments

    found = {1: [(1000, 0.2), (900, 0.1), (1000, 0.2)], 2: [(1500, 0.2), (1300, 0.1), (1500, 0.2)]}
    assert len(step_moments(found)) == 1
