"""Memory per rank at N ranks under FSDP2, by arithmetic on the model's shapes.

At N ranks each rank holds, for the whole step (FSDP2's `fully_shard`, torch's
`_fsdp_param.py`: each parameter a DTensor sharded on dim 0, padded to a multiple of N):

- its parameters' shard, ceil(rows / N) rows of each, in the model's dtype;
- after the backward, the gradients' shard, the same size (reduce-scattered into it);
- the optimizer's state of its shard: Adam's two moments, SGD's momentum, in the shard's
  dtype, plus Adam's step scalar per parameter;
- the buffers, whole (FSDP2 does not shard them).

During the forward and backward a unit's parameters are all-gathered, in the mixed-precision
policy's `param_dtype`, before it computes and freed after (`reshard_after_forward`); the
root's are held through both (it is resharded only after the backward). At N >= 2 the flat
all-gather output a unit's parameters were copied out of stays alive until the next unit's
copy-out (FSDP2's implicit prefetch, `FSDPParamGroup.wait_for_unshard`), so beside the unit
computing one more unit's worth is in flight (`prefetch`, 1 by default; explicit prefetching
raises it); at N = 1 nothing is all-gathered (the unsharded parameters are made from the shard
in place, `FSDPParamGroup.unshard`), so the computing unit counts once. The largest unit is the
one counted. The activations (and the backward's temporaries) are what a fake step measures,
fitted against the batch (collect/shard_memory.py); with `set_to_none` zero_grad no gradient
is held when the backward starts, where the activations peak, so the step's peak is the larger
of that moment and the optimizer's step.

The check against the measured peak of a real FSDP2 job (torch's `FSDPMemTracker` in each rank
of a gloo job) is benchmarks/bench_shard_memory.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from torchdoctor.analyze.memory_fit import fit_line
from torchdoctor.core.errors import UsageError
from torchdoctor.core.memory_owners import LinearFit
from torchdoctor.core.shard_memory import BackwardMoment, ModelShape, RankMemory, ShardPlan

#: What the backward is read from: its moments, or one line (activations, no gradient held).
Moments = Sequence[BackwardMoment] | LinearFit

#: Units in flight beside the one computing, at N >= 2: FSDP2 keeps the last all-gather result
#: until the next unit's copy-out (`FSDPParamGroup.wait_for_unshard`, its implicit forward
#: prefetch), and its backward prefetches one unit (`_backward_prefetch`), both by default.
DEFAULT_PREFETCH = 1


def sharded_bytes(shape: ModelShape, world_size: int) -> int:
    """One rank's parameter shard (bytes), the padding included."""
    return sum(u.shard_numel(world_size) for u in shape.units) * shape.parameter_bytes


def optimizer_state_bytes(shape: ModelShape, world_size: int) -> int:
    """One rank's optimizer state: the per-element states of its shard, and the scalars each
    parameter keeps (Adam's `step`) on every rank."""
    elements = sum(u.shard_numel(world_size) for u in shape.units)
    scalars = shape.scalar_states_per_parameter * shape.parameter_count * shape.scalar_state_bytes
    return shape.states_per_element * elements * shape.state_bytes + scalars


def unsharded_bytes(
    shape: ModelShape, world_size: int, *, param_dtype_bytes: int, prefetch: int
) -> int:
    """The parameters unsharded at once: the root's, and the largest other unit's times
    (prefetch + 1) at N >= 2 (once at N = 1, where nothing is all-gathered), each with its
    padding, in the policy's parameter dtype."""
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    *others, root = shape.units
    largest = max((u.padded_numel(world_size) for u in others), default=0)
    in_flight = 1 + (prefetch if world_size > 1 else 0)
    held = root.padded_numel(world_size) + in_flight * largest
    return held * param_dtype_bytes


def _moments(moments: Moments) -> list[BackwardMoment]:
    if isinstance(moments, LinearFit):
        return [BackwardMoment(activations=moments, gradients_done=0.0)]
    if not moments:
        raise ValueError("the backward needs at least one moment")
    return list(moments)


def step_moments(found: dict[int, list[tuple[int, float]]]) -> list[BackwardMoment]:
    """The fake steps' moments (`collect.shard_memory.fake_activations`: by batch, the peak's
    first, then one per gradient landed, in the same order at every batch) as lines in the
    batch, each with the larger share of gradients landed; only those no other moment
    exceeds in activations, slope and gradients alike are kept, the peak's first."""
    sizes = sorted(found)
    lengths = {len(found[b]) for b in sizes}
    count = lengths.pop() if len(lengths) == 1 else 1  # unaligned: the peaks alone
    lines = [
        BackwardMoment(
            activations=fit_line(sizes, [found[b][i][0] for b in sizes]),
            gradients_done=max(found[b][i][1] for b in sizes),
        )
        for i in range(count)
    ]

    def covers(a: BackwardMoment, b: BackwardMoment) -> bool:
        return (
            a.activations.fixed_bytes >= b.activations.fixed_bytes
            and a.activations.per_sample_bytes >= b.activations.per_sample_bytes
            and a.gradients_done >= b.gradients_done
        )

    def dropped(i: int) -> bool:
        # covered by another; of equal ones the first stays; the peak's (0) always stays
        return i > 0 and any(
            covers(lines[j], lines[i]) and (j < i or not covers(lines[i], lines[j]))
            for j in range(len(lines))
            if j != i
        )

    kept = [line for i, line in enumerate(lines) if not dropped(i)]
    return kept


def rank_memory(
    shape: ModelShape,
    world_size: int,
    batch: int,
    moments: Moments,
    *,
    param_dtype_bytes: int,
    prefetch: int = DEFAULT_PREFETCH,
) -> RankMemory:
    """One rank's memory at `world_size` ranks and `batch` samples per rank."""
    params = sharded_bytes(shape, world_size)
    state = optimizer_state_bytes(shape, world_size)
    gathered = unsharded_bytes(
        shape, world_size, param_dtype_bytes=param_dtype_bytes, prefetch=prefetch
    )
    acts, held = max(
        (
            (max(0, round(m.activations.at(batch))), round(m.gradients_done * params))
            for m in _moments(moments)
        ),
        key=sum,
    )
    resident = params + state + shape.buffers_bytes
    backward, optimizer = resident + gathered + acts + held, resident + params
    return RankMemory(
        world_size=world_size,
        batch=batch,
        parameters_bytes=params,
        gradients_bytes=params,
        optimizer_state_bytes=state,
        buffers_bytes=shape.buffers_bytes,
        unsharded_bytes=gathered,
        activations_bytes=acts,
        gradients_held_bytes=held,
        backward_peak_bytes=backward,
        optimizer_peak_bytes=optimizer,
        peak_bytes=max(backward, optimizer),
    )


def max_batch_per_rank(
    shape: ModelShape,
    world_size: int,
    moments: Moments,
    budget_bytes: int,
    *,
    param_dtype_bytes: int,
    prefetch: int = DEFAULT_PREFETCH,
) -> int:
    """The largest batch per rank whose peak fits `budget_bytes` (0: not even one sample)."""
    at_zero = rank_memory(
        shape, world_size, 0, moments, param_dtype_bytes=param_dtype_bytes, prefetch=prefetch
    )
    if at_zero.optimizer_peak_bytes > budget_bytes:
        return 0
    params = at_zero.parameters_bytes
    base = at_zero.parameters_bytes + at_zero.optimizer_state_bytes + at_zero.buffers_bytes
    base += at_zero.unsharded_bytes
    limits = []
    for moment in _moments(moments):
        room = budget_bytes - base - moment.gradients_done * params - moment.activations.fixed_bytes
        slope = moment.activations.per_sample_bytes
        if slope > 0:
            limits.append(math.floor(room / slope))
        elif room < 0:
            return 0
    if not limits:
        raise UsageError(
            "the fake steps' activations do not grow with the batch, so no largest batch follows",
            hint="check the workload's inputs: a batch of them must change its forward",
        )
    return max(0, min(limits))


def plan_shards(
    workload: str,
    shape: ModelShape,
    moments: Moments,
    world_sizes: Sequence[int],
    *,
    param_dtype: str,
    param_dtype_bytes: int,
    batch: int | None = None,
    budget_bytes: int | None = None,
    prefetch: int = DEFAULT_PREFETCH,
    params: dict[str, int | float | str] | None = None,
    wall_s: float = 0.0,
) -> ShardPlan:
    """Each N's memory per rank, at `batch` or (with a budget) at the largest batch that fits.
    The first of `moments` is the fake steps' peak (`step_moments` keeps it first)."""
    if not world_sizes or min(world_sizes) < 1:
        raise UsageError(
            f"cannot shard over {list(world_sizes)} ranks", hint="give --nproc 1 or more"
        )
    limits: dict[int, int] = {}
    ranks = []
    for n in world_sizes:
        shown = batch
        if budget_bytes is not None:
            limits[n] = max_batch_per_rank(
                shape,
                n,
                moments,
                budget_bytes,
                param_dtype_bytes=param_dtype_bytes,
                prefetch=prefetch,
            )
            shown = batch if batch is not None else max(1, limits[n])
        ranks.append(
            rank_memory(
                shape,
                n,
                shown if shown is not None else 1,
                moments,
                param_dtype_bytes=param_dtype_bytes,
                prefetch=prefetch,
            )
        )
    return ShardPlan(
        workload=workload,
        params=dict(params or {}),
        parameters=shape.numel,
        shape=shape,
        param_dtype=param_dtype,
        param_dtype_bytes=param_dtype_bytes,
        prefetch=prefetch,
        activations_fit=_moments(moments)[0].activations,
        moments=_moments(moments),
        ranks=ranks,
        budget_bytes=budget_bytes,
        max_batch=limits,
        wall_s=wall_s,
    )
