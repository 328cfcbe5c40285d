"""FSDP2's communication per step, projected to N ranks and a bandwidth with a band; and DDP,
FSDP and FSDP with CPU offload compared for one model.

FSDP2 (`fully_shard`, torch's `_fsdp_param_group.py`) runs per unit, in each step:

- in the forward, an all-gather of the unit's parameters in the mixed-precision policy's
  `param_dtype` (the root's first; the output is the unit padded to N rows a parameter);
- in the backward, the same all-gather again for every unit but the root, whose parameters
  stay unsharded between its forward and backward (`reshard_after_forward` frees the others);
- after the unit's backward, a reduce-scatter of its gradients in `reduce_dtype`.

Each is timed with the all-gather's alpha-beta fit (scale/fit.py) carried to N as a ring: a
ring all-gather of S bytes takes N-1 steps and carries (N-1)/N * S over each link, and a
ring reduce-scatter the same (NCCL-tests, doc/PERFORMANCE.md: both have the bus factor
(N-1)/N), so alpha grows as N-1 and the bytes by the bus factor, as DDP's all-reduce is
carried in scale/model.py. The band is 95%: the fit's standard error at each size, summed
(the collectives share the fit, so their errors move together).

`compare_strategies` sets the three side by side at one N and batch: each rank's device
memory (analyze/shard_memory.py for FSDP; DDP holds every parameter, gradient and state, and
its buckets a second copy of the gradients; CPU offload keeps the shards, gradients and state
in host memory, so the device holds the unsharded units, the activations and one unit's shard
on its way in), and the bytes each rank's link carries per step (DDP: an all-reduce of the
gradients, 2(N-1)/N of their bytes; FSDP: its all-gathers and reduce-scatters, (N-1)/N of
theirs; offload adds the copies to and from the host, the parameters in and the gradients
out, on the host link rather than the network).
"""

from __future__ import annotations

from typing import Literal

from torchdoctor.analyze import DEFAULT_PREFETCH, Moments, rank_memory
from torchdoctor.core.errors import ScaleError
from torchdoctor.core.records import SubRecord
from torchdoctor.core.shard_memory import ModelShape, StrategyCost
from torchdoctor.scale.fit import AlphaBetaFit, bus_factor
from torchdoctor.scale.model import Z_95

FsdpKind = Literal["all_gather", "reduce_scatter"]


class FsdpCollective(SubRecord):
    """One collective of a step: its unit, kind, phase and size (the unsharded bytes, as
    NCCL-tests counts an all-gather's and a reduce-scatter's size)."""

    unit: str
    kind: FsdpKind
    phase: Literal["forward", "backward"]
    size_bytes: int


def fsdp_collectives(
    shape: ModelShape,
    world_size: int,
    *,
    param_dtype_bytes: int,
    reduce_dtype_bytes: int = 4,
) -> list[FsdpCollective]:
    """The collectives of one step, in order (none at N = 1: nothing is gathered)."""
    if world_size < 1:
        raise ScaleError(f"world size must be at least 1, got {world_size}")
    if world_size == 1:
        return []
    *others, root = shape.units
    gathered = [root, *others]

    def size(unit_numel: int, element: int) -> int:
        return unit_numel * element

    out = [
        FsdpCollective(
            unit=u.name,
            kind="all_gather",
            phase="forward",
            size_bytes=size(u.padded_numel(world_size), param_dtype_bytes),
        )
        for u in gathered
    ]
    for u in reversed(others):
        padded = u.padded_numel(world_size)
        out.append(
            FsdpCollective(
                unit=u.name,
                kind="all_gather",
                phase="backward",
                size_bytes=size(padded, param_dtype_bytes),
            )
        )
        out.append(
            FsdpCollective(
                unit=u.name,
                kind="reduce_scatter",
                phase="backward",
                size_bytes=size(padded, reduce_dtype_bytes),
            )
        )
    out.append(
        FsdpCollective(
            unit=root.name,
            kind="reduce_scatter",
            phase="backward",
            size_bytes=size(root.padded_numel(world_size), reduce_dtype_bytes),
        )
    )
    return out


class FsdpCommunication(SubRecord):
    """A step's FSDP2 collectives timed at `world_size` (seconds, 95% band)."""

    world_size: int
    busbw_bytes_per_s: float
    collectives: int
    #: Bytes each rank's link carries in the step: (N-1)/N of every collective's size.
    link_bytes: float
    seconds: float
    low_s: float
    high_s: float


def fsdp_communication(
    collectives: list[FsdpCollective],
    fit: AlphaBetaFit,
    world_size: int,
    *,
    busbw: float | None = None,
) -> FsdpCommunication:
    """The collectives' time at `world_size` from an all-gather fit measured at its own world
    size (`busbw` replaces the fit's link bandwidth: another network)."""
    if fit.collective != "all_gather" or fit.world_size < 2:
        raise ScaleError(
            "FSDP's collectives are timed from an all-gather fit at 2 or more ranks, "
            f"got {fit.collective} at {fit.world_size}"
        )
    link = busbw if busbw is not None else fit.busbw
    steps = (world_size - 1) / (fit.world_size - 1)
    per_byte = bus_factor("all_gather", world_size) / link
    total = error = 0.0
    for c in collectives:
        t = fit.alpha_s * steps + per_byte * c.size_bytes
        total += t
        # the fit's relative error at the same size, carried with it
        error += fit.predict_se(c.size_bytes) / max(fit.predict(c.size_bytes), 1e-30) * t
    return FsdpCommunication(
        world_size=world_size,
        busbw_bytes_per_s=link,
        collectives=len(collectives),
        link_bytes=sum(c.size_bytes for c in collectives) * bus_factor("all_gather", world_size),
        seconds=total,
        low_s=max(0.0, total - Z_95 * error),
        high_s=total + Z_95 * error,
    )


def compare_strategies(
    shape: ModelShape,
    world_size: int,
    batch: int,
    moments: Moments,
    *,
    param_dtype_bytes: int,
    reduce_dtype_bytes: int = 4,
    prefetch: int = DEFAULT_PREFETCH,
) -> list[StrategyCost]:
    """DDP, FSDP and FSDP with CPU offload at `world_size` ranks and `batch` per rank."""
    whole = rank_memory(
        shape, 1, batch, moments, param_dtype_bytes=param_dtype_bytes, prefetch=prefetch
    )
    fsdp = rank_memory(
        shape, world_size, batch, moments, param_dtype_bytes=param_dtype_bytes, prefetch=prefetch
    )
    collectives = fsdp_collectives(
        shape,
        world_size,
        param_dtype_bytes=param_dtype_bytes,
        reduce_dtype_bytes=reduce_dtype_bytes,
    )
    fsdp_link = sum(c.size_bytes for c in collectives) * bus_factor("all_gather", world_size)
    grads = whole.gradients_bytes
    # DDP: every parameter, gradient and state on each rank, as one process's step (nothing
    # gathered), plus its buckets: a second copy of the gradients (`gradient_as_bucket_view`
    # is False by default).
    ddp = StrategyCost(
        strategy="ddp",
        world_size=world_size,
        batch=batch,
        device_bytes=max(
            whole.backward_peak_bytes - whole.unsharded_bytes, whole.optimizer_peak_bytes
        )
        + grads,
        host_bytes=0,
        network_bytes=bus_factor("all_reduce", world_size) * grads if world_size > 1 else 0.0,
        host_link_bytes=0.0,
    )
    sharded = fsdp.parameters_bytes + fsdp.gradients_bytes + fsdp.optimizer_state_bytes
    on_device = StrategyCost(
        strategy="fsdp",
        world_size=world_size,
        batch=batch,
        device_bytes=fsdp.peak_bytes,
        host_bytes=0,
        network_bytes=fsdp_link,
        host_link_bytes=0.0,
    )
    # Offload: the shards, their gradients and the state live in host memory and the
    # optimizer steps there; each unit's shard is copied to the device before its all-gather
    # and its gradient shard back after its reduce-scatter.
    offload = StrategyCost(
        strategy="fsdp_offload",
        world_size=world_size,
        batch=batch,
        device_bytes=fsdp.backward_peak_bytes
        - fsdp.parameters_bytes
        - fsdp.optimizer_state_bytes
        - fsdp.gradients_held_bytes
        + max(u.shard_numel(world_size) for u in shape.units) * shape.parameter_bytes,
        host_bytes=sharded,
        network_bytes=fsdp_link,
        host_link_bytes=float(fsdp.parameters_bytes + fsdp.gradients_bytes),
    )
    return [ddp, on_device, offload]
