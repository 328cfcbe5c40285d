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
carried in scale/projection.py. The band is 95%: the fit's standard error at each size, summed
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

from collections.abc import Sequence
from typing import Literal

from torchdoctor.analyze import DEFAULT_PREFETCH, Moments, rank_memory
from torchdoctor.core.errors import ScaleError
from torchdoctor.core.records import SubRecord
from torchdoctor.core.shard_memory import ModelShape, StrategyCost
from torchdoctor.scale._fsdp_probe import FsdpProbe
from torchdoctor.scale.fit import AlphaBetaFit, bus_factor
from torchdoctor.scale.projection import Z_95, rank_skew

FsdpKind = Literal["all_gather", "reduce_scatter"]
#: Which of a step's collectives can run under its compute (`project_fsdp`):
#: - "prefetch": every one but the root's two. A device with streams (NCCL): FSDP2 issues the
#:   all-gathers on an all-gather stream, prefetched, and the reduce-scatters on a
#:   reduce-scatter stream, behind the next unit's backward.
#: - "all_gather": the non-root all-gathers only. A device without streams (the CPU, gloo)
#:   where the job prefetches its unshards and issues them asynchronously
#:   (`_set_unshard_async_op`): gloo's thread gathers the next unit while this one computes.
#:   FSDP2 calls each reduce-scatter without `async_op` (torch's `_fsdp_collectives.
#:   foreach_reduce`), and a CPU "stream" is the calling thread, so the rank waits for each.
#: - "none": every collective on the step (synchronous unshards, or no prefetch).
Overlap = Literal["prefetch", "all_gather", "none"]


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
    reshard_after_forward: bool = True,
) -> list[FsdpCollective]:
    """The collectives of one step, in order (none at N = 1: nothing is gathered). Without
    `reshard_after_forward` every unit stays unsharded from its forward to its backward: no
    all-gather in the backward."""
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
        if reshard_after_forward:
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


def _timed(
    c: FsdpCollective,
    fits: dict[FsdpKind, AlphaBetaFit],
    world_size: int,
    busbw: float | None,
) -> tuple[float, float]:
    """(seconds, standard error) of one collective at `world_size`: its kind's fit carried
    as a ring (see the module), its relative error at the same size carried with it."""
    fit = fits[c.kind]
    link = busbw if busbw is not None else fit.busbw
    steps = (world_size - 1) / (fit.world_size - 1)
    t = fit.alpha_s * steps + bus_factor(c.kind, world_size) / link * c.size_bytes
    return t, fit.predict_se(c.size_bytes) / max(fit.predict(c.size_bytes), 1e-30) * t


def _fits(fit: AlphaBetaFit, reduce_scatter: AlphaBetaFit | None) -> dict[FsdpKind, AlphaBetaFit]:
    if fit.collective != "all_gather" or fit.world_size < 2:
        raise ScaleError(
            "FSDP's collectives are timed from an all-gather fit at 2 or more ranks, "
            f"got {fit.collective} at {fit.world_size}"
        )
    if reduce_scatter is not None and (
        reduce_scatter.collective != "reduce_scatter" or reduce_scatter.world_size < 2
    ):
        raise ScaleError(
            "FSDP's reduce-scatters are timed from a reduce-scatter fit at 2 or more ranks, "
            f"got {reduce_scatter.collective} at {reduce_scatter.world_size}"
        )
    return {"all_gather": fit, "reduce_scatter": reduce_scatter or fit}


def fsdp_communication(
    collectives: list[FsdpCollective],
    fit: AlphaBetaFit,
    world_size: int,
    *,
    busbw: float | None = None,
    reduce_scatter: AlphaBetaFit | None = None,
) -> FsdpCommunication:
    """The collectives' time at `world_size` from an all-gather fit measured at its own world
    size, and the reduce-scatters' from `reduce_scatter`'s where one was measured (else the
    all-gather's: the same ring, the same bytes per link); `busbw` replaces the fits' link
    bandwidth: another network."""
    fits = _fits(fit, reduce_scatter)
    link = busbw if busbw is not None else fit.busbw
    total = error = 0.0
    for c in collectives:
        t, se = _timed(c, fits, world_size, busbw)
        total += t
        error += se
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


class FsdpProjection(SubRecord):
    """An FSDP2 job's step at `world_size` projected from its N = 1 step and a collective
    microbenchmark (`project_fsdp`), seconds, with a 95% band."""

    world_size: int
    #: N = 1's step less its optimizer, times the co-location slowdown.
    compute_s: float
    #: N = 1's optimizer times the share a shard's step takes of the whole's: from the ranks'
    #: probe of the job's optimizer at both sizes (`_fsdp_probe.OptimizerProbe.share`), else
    #: the share of the elements a rank holds.
    optimizer_s: float
    #: That share, and whether the probe gave it ("probe") or the elements did ("elements").
    optimizer_share: float = 1.0
    optimizer_source: Literal["probe", "elements"] = "elements"
    #: FSDP2's copies around its collectives on the rank's CPU, which N = 1 does not run,
    #: timed in the ranks at the job's unit sizes (`_fsdp_probe.FsdpProbe`; 0 without one).
    copy_s: float = 0.0
    colocation_slowdown: float
    communication: FsdpCommunication
    #: Communication under the compute (prefetched all-gathers, reduce-scatters behind the
    #: next unit's backward), and what stays on the step: the root's forward all-gather and
    #: its reduce-scatter (nothing runs beside them), the rest beyond the compute, and where
    #: the ranks fill the cores the hidden collectives' CPU time.
    hidden_s: float
    exposed_s: float
    #: What runs under the compute; the assumption the hidden part rests on (`Overlap`).
    overlap: Overlap
    #: What the hidden collectives take from the compute (in `exposed_s`): the probe's timing
    #: of each behind the computation ("probe"), else the all-gather's CPU share ("cpu").
    interference_source: Literal["probe", "cpu"] = "cpu"
    interference_s: float = 0.0
    #: The wait for the slowest rank (`projection.rank_skew`; 0 in an older record).
    skew_s: float = 0.0
    step_s: float
    low_s: float
    high_s: float


def _overlaps(collective: FsdpCollective, overlap: Overlap) -> bool:
    """Whether `overlap` lets `collective` (not the root's first or last) run under compute."""
    return overlap == "prefetch" or (overlap == "all_gather" and collective.kind == "all_gather")


def project_fsdp(
    *,
    step_s: float,
    optimizer_s: float,
    shape: ModelShape,
    world_size: int,
    all_gather: AlphaBetaFit,
    reduce_scatter: AlphaBetaFit | None = None,
    param_dtype_bytes: int,
    reduce_dtype_bytes: int,
    reshard_after_forward: bool,
    overlap: Overlap,
    colocation: tuple[float, float, float] = (1.0, 1.0, 1.0),
    cpu_share: float | None = None,
    busbw: float | None = None,
    step_times: Sequence[float] = (),
    probe: FsdpProbe | None = None,
) -> FsdpProjection:
    """The step at `world_size` from N = 1's (`step_s`, of which `optimizer_s` is the
    optimizer's), the collectives from the fits, the co-location slowdown (median, low,
    high) and the overlap.

    T(N) = s * (T1 - opt) + opt * shard + exposed, where s is the co-location slowdown and
    shard the share of the elements one rank holds. Exposed: the root's forward all-gather
    and its reduce-scatter always (the first and last collectives, with no compute beside
    them); of the others, those `overlap` leaves on the step (`Overlap`: each unit waits for
    its own synchronous collective), and of those it lets run under the compute only what
    exceeds the compute, plus, where the ranks fill the cores, `cpu_share` of the hidden
    time (the CPU the collectives' own work takes from the compute: the all-gather's CPU
    seconds over its wall seconds, from the microbenchmark). Plus the skew: the ranks meet in
    every step's collectives, so the step waits for its slowest rank, drawn from N = 1's
    `step_times` as DDP's projection draws it (`projection.rank_skew`; 0 without them). With
    the ranks' `probe` (`_fsdp_probe`): FSDP2's copies around the collectives are added to the
    step as timed (the ranks ran them at once, as they run their steps, so not slowed again),
    the optimizer's shard share is the probe's per-tensor + per-element one, and what the
    hidden all-gathers take from the compute is the probe's timing of each behind a
    computation (instead of `cpu_share`). The
    band: the fits' 95% band on the communication and the slowdown's interval on the
    compute, at their ends together.
    """
    if step_s <= 0 or optimizer_s < 0 or optimizer_s > step_s:
        raise ScaleError(
            f"N = 1's step ({step_s:g} s) must be positive and hold its optimizer "
            f"({optimizer_s:g} s)"
        )
    collectives = fsdp_collectives(
        shape,
        world_size,
        param_dtype_bytes=param_dtype_bytes,
        reduce_dtype_bytes=reduce_dtype_bytes,
        reshard_after_forward=reshard_after_forward,
    )
    fits = _fits(all_gather, reduce_scatter)
    comm = fsdp_communication(
        collectives, all_gather, world_size, busbw=busbw, reduce_scatter=reduce_scatter
    )
    slow, slow_low, slow_high = colocation
    shard = sum(u.shard_numel(world_size) for u in shape.units) / max(1, shape.numel)
    base = step_s - optimizer_s
    compute = slow * base
    timed = [_timed(c, fits, world_size, busbw) for c in collectives]
    # the root's forward all-gather is first, its reduce-scatter last (fsdp_collectives):
    # with no compute beside them they are on the step, as is every collective the overlap
    # does not let run under the compute
    middle = list(zip(collectives[1:-1], timed[1:-1], strict=True))
    edges = [timed[0], timed[-1]] if timed else []
    on_step = [*edges, *(t for c, t in middle if not _overlaps(c, overlap))]
    under = [t for c, t in middle if _overlaps(c, overlap)]
    edge_s, edge_se = sum(t for t, _ in on_step), sum(e for _, e in on_step)
    rest_s, rest_se = sum(t for t, _ in under), sum(e for _, e in under)

    # what the hidden collectives take from the compute: the probe's timing of each behind
    # the computation where it has them, else `cpu_share` of their time
    interference = (
        sum(probe.under_compute_s.get(c.unit, 0.0) for c, _ in middle if _overlaps(c, overlap))
        if probe is not None and probe.under_compute_s
        else None
    )

    def taken(rest_time: float, hidden: float) -> float:
        if interference is None:
            return (cpu_share or 0.0) * hidden
        return interference * (hidden / rest_time if rest_time > 0 else 0.0)

    def exposed(rest_time: float, compute_time: float) -> tuple[float, float]:
        hidden = min(rest_time, compute_time)
        return rest_time - hidden + taken(rest_time, hidden), hidden

    out, hidden = exposed(rest_s, compute)
    low_out, _ = exposed(max(0.0, rest_s - Z_95 * rest_se), slow_high * base)
    high_out, _ = exposed(rest_s + Z_95 * rest_se, slow_low * base)
    shard_elements = sum(
        -(-p.rows // world_size) * (p.numel // max(1, p.rows))
        for u in shape.units
        for p in u.parameters
    )
    timed_opt = probe.optimizer if probe is not None else None
    share = timed_opt.share(shard_elements) if timed_opt is not None else shard
    optimizer = optimizer_s * share
    # FSDP2's work around each collective, as often as the step runs it (none at N = 1)
    copies = sum(probe.work_s(c.unit, c.kind) for c in collectives) if probe is not None else 0.0
    exposed_s = edge_s + out
    skew = rank_skew([t * slow for t in step_times], world_size)
    return FsdpProjection(
        world_size=world_size,
        compute_s=compute,
        optimizer_s=optimizer * slow,
        optimizer_share=share,
        optimizer_source="probe" if timed_opt is not None else "elements",
        copy_s=copies,
        interference_source="probe" if interference is not None else "cpu",
        interference_s=taken(rest_s, hidden),
        colocation_slowdown=slow,
        communication=comm,
        hidden_s=hidden,
        exposed_s=exposed_s,
        overlap=overlap,
        skew_s=skew,
        step_s=compute + optimizer * slow + copies + exposed_s + skew,
        low_s=slow_low * (base + optimizer)
        + copies
        + max(0.0, edge_s - Z_95 * edge_se)
        + low_out
        + skew,
        high_s=slow_high * (base + optimizer) + copies + edge_s + Z_95 * edge_se + high_out + skew,
    )
