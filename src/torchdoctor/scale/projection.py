"""The scaling model: a step at N ranks from the step at one rank and the collectives' fit.

    T(N) = compute + (communication - overlap) + optimizer + data + skew
           (+ the overlapped communication's CPU, where every core computes)

- compute (forward, backward, `other`) and data (data wait, host-to-device) are the N=1
  measurement's phases; strong scaling divides the global batch by N, so they shrink by N
  (a linear-in-batch assumption), weak scaling keeps them;
- the optimizer steps the whole model on every rank and does not shrink: with `other`, this
  is the part Amdahl's law calls serial;
- communication is DDP's bucketed all-reduce of the gradients (`buckets.py`), each bucket
  timed by the alpha-beta fit (`fit.py`) carried to N: a ring all-reduce moves
  `2(N-1)/N * S` over each link and takes `2(N-1)` latency steps, so alpha grows as `N-1` and
  the bytes as the bus factor. A parameter server moves `(N-1) * S` into its link and as much
  out (`2(N-1) * S` over one link in sequence), its latency growing as `N-1` too. Overlap is
  what the backward pass hides (`exposed_communication`);
- co-location: at N >= 2 every term computed on the host (compute, data, optimizer, the
  backward that hides communication, the step times the skew is drawn from) is the N=1
  phase times the slowdown the microbenchmark measured for ranks computing at once on the
  machine (`collectives.ColocationProbe`; 1 where none was measured): N=1 ran with the
  machine to itself. It is carried to other N as measured, i.e. with as many ranks per
  machine as in the measurement;
- CPU taken by overlapped communication: on a host where every core runs a rank's
  computation (`CollectiveBench.threads_per_core` >= 1, as 2 ranks x 1 thread on 2 cores),
  a collective's own CPU work (gloo's threads reducing and copying, the kernel's sockets;
  the microbenchmark measures it per call, `ring_cpu`) has no idle core to run on while the
  backward computes, so the part of the communication the backward hides takes its CPU from
  the backward: the step grows by the buckets' CPU times the hidden share of their time
  (`stolen_s`). A gradient that fills one bucket is reduced after the backward and hides
  nothing (mlp); with spare cores the hidden part is free (`stolen_s` 0);
- skew: the job waits for its slowest rank every step. With ranks' step times drawn
  independently from the N=1 distribution F, the median of their maximum is
  `F^-1(0.5^(1/N))` (the maximum of N draws is below x with probability F(x)^N), so the
  skew is that quantile minus the median.

The uncertainty band propagates, in quadrature, the N=1 step median's 95% interval (spread
over the terms taken from it), the co-location slowdown's 95% interval (over the same
terms) and the fit's parameter covariance and residual scatter (`AlphaBetaFit.predict_se`),
at 95% (1.96 standard errors). Amdahl's serial fraction of the
projection is Karp and Flatt's, from its speedup (`worlds.karp_flatt`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Final, Literal

import numpy as np

from torchdoctor.core.errors import ScaleError
from torchdoctor.core.records import SubRecord
from torchdoctor.scale.buckets import exposed_communication
from torchdoctor.scale.fit import AlphaBetaFit, bus_factor
from torchdoctor.scale.worlds import MeasuredWorld, ScalingMode, karp_flatt, speedup

Architecture = Literal["ring", "parameter_server"]
ARCHITECTURES: Final[tuple[Architecture, ...]] = ("ring", "parameter_server")
#: Standard errors in a 95% two-sided normal interval.
Z_95: Final = 1.959963984540054


class Projection(SubRecord):
    """One projected world: the step, its 95% band and the model's terms (seconds)."""

    world_size: int
    architecture: Architecture
    busbw_bytes_per_s: float
    step_s: float
    low_s: float
    high_s: float
    compute_s: float
    #: The backward pass's part of `compute_s` (the communication overlaps it).
    backward_s: float = 0.0
    colocation_slowdown: float = 1.0
    data_s: float
    optimizer_s: float
    communication_s: float
    overlap_s: float
    exposed_s: float
    #: The hidden communication's CPU, taken from the backward on a fully used host.
    stolen_s: float = 0.0
    skew_s: float
    speedup: float
    efficiency: float
    serial_fraction: float | None


class ScalingModel(SubRecord):
    """What a projection needs: the N=1 world, the gradients' buckets and the fits."""

    mode: ScalingMode
    base: MeasuredWorld
    gradient_bytes: int
    buckets: list[int]
    ring: AlphaBetaFit
    parameter_server: AlphaBetaFit | None = None
    #: Ranks' compute at N >= 2 over their compute alone, and its 95% interval (see the module).
    colocation_slowdown: float = 1.0
    colocation_ci: tuple[float, float] = (1.0, 1.0)
    #: CPU seconds of one all-reduce in a rank, fitted like its time (None: not measured), and
    #: the ranks' compute threads per core at the measured world (see the module).
    ring_cpu: AlphaBetaFit | None = None
    threads_per_core: float | None = None


def _carried(
    fit: AlphaBetaFit, world_size: int, arch: Architecture, busbw: float | None
) -> tuple[Callable[[float], float], Callable[[float], float]]:
    """(bucket seconds, its standard error) at `world_size`, from `fit` measured at its own
    world size (see the module); `busbw` replaces the fit's link bandwidth. The error keeps the
    fit's relative error at the same size."""
    steps = (world_size - 1) / (fit.world_size - 1)
    link = busbw if busbw is not None else fit.busbw
    if arch == "ring":
        per_byte = bus_factor("all_reduce", world_size) / link
    else:
        per_byte = 2.0 * (world_size - 1) / link

    def seconds(size: float) -> float:
        return fit.alpha_s * steps + per_byte * size

    def stderr(size: float) -> float:
        return fit.predict_se(size) / max(fit.predict(size), 1e-30) * seconds(size)

    return seconds, stderr


def _stolen(
    model: ScalingModel, world_size: int, arch: Architecture, comm: float, exposed: float
) -> tuple[float, float]:
    """(the CPU the hidden communication takes from the backward, its relative error): see
    the module. The all-reduce's CPU is carried to `world_size` as its time is (a ring rank
    handles `2(N-1)/N` of the bytes); a parameter server's is not measured (0)."""
    cpu_fit = model.ring_cpu
    full = model.threads_per_core is not None and model.threads_per_core >= 1.0
    if cpu_fit is None or not full or arch != "ring" or comm <= 0 or comm <= exposed:
        return 0.0, 0.0
    seconds, _ = _carried(cpu_fit, world_size, "ring", None)
    cpu = sum(seconds(b) for b in model.buckets)
    return cpu * (comm - exposed) / comm, cpu_fit.rel_rms_residual


def rank_skew(step_times: Sequence[float], world_size: int) -> float:
    """The job's wait for its slowest rank per step: the median of the maximum of
    `world_size` draws from `step_times` less their median (see the module)."""
    if world_size <= 1 or len(step_times) < 2:
        return 0.0
    times = np.asarray(step_times)
    return max(0.0, float(np.quantile(times, 0.5 ** (1.0 / world_size)) - np.median(times)))


def project(
    model: ScalingModel,
    world_size: int,
    *,
    architecture: Architecture = "ring",
    busbw: float | None = None,
) -> Projection:
    """The step at `world_size` ranks (see the module for each term)."""
    if world_size < 1:
        raise ScaleError(f"a world size must be at least 1, got {world_size}")
    fit = model.ring if architecture == "ring" else (model.parameter_server or model.ring)
    if fit.world_size < 2:
        raise ScaleError("the collectives' fit needs a world of at least 2 ranks")
    base = model.base
    shrink = world_size if model.mode == "strong" else 1
    # the phases are means; scaled to the median step so that T(1) is the measured median
    total = sum(base.phases.values())
    calibrate = base.step_s / total if total > 0 else 1.0
    slow = model.colocation_slowdown if world_size >= 2 else 1.0
    ph = {p: v * calibrate * slow for p, v in base.phases.items()}
    forward, backward = ph.get("forward", 0.0), ph.get("backward", 0.0)
    other, optimizer = ph.get("other", 0.0), ph.get("optimizer", 0.0)
    data = (ph.get("data_wait", 0.0) + ph.get("h2d", 0.0)) / shrink
    compute = (forward + backward) / shrink + other
    if world_size == 1:
        comm = exposed = comm_var = stolen = 0.0
    else:
        if busbw is None and architecture == "parameter_server" and model.parameter_server is None:
            busbw = model.ring.busbw  # the ring's link speed for a server never measured
        seconds, stderr = _carried(fit, world_size, architecture, busbw)
        comm, exposed = exposed_communication(model.buckets, backward / shrink, seconds)
        comm_var = sum(stderr(b) ** 2 for b in model.buckets)
        # the exposed part moves with the whole; scale its error by its share
        comm_var *= (exposed / comm) ** 2 if comm > 0 else 0.0
        stolen, stolen_rel = _stolen(model, world_size, architecture, comm, exposed)
        comm_var += (stolen * stolen_rel) ** 2
    skew = rank_skew([t * slow / shrink for t in base.step_times], world_size)
    step = compute + data + optimizer + exposed + stolen + skew
    rel_base = (base.step_ci[1] - base.step_ci[0]) / 2.0 / base.step_s if base.step_s > 0 else 0
    low, high = model.colocation_ci if world_size >= 2 else (1.0, 1.0)
    rel_slow = (high - low) / 2.0 / slow if slow > 0 else 0.0
    base_var = ((rel_base**2 + rel_slow**2) * (compute + data + optimizer) ** 2) / Z_95**2
    half = Z_95 * math.sqrt(base_var + comm_var)
    up = speedup(base.step_s, step, world_size, model.mode)
    return Projection(
        world_size=world_size,
        architecture=architecture,
        busbw_bytes_per_s=busbw if busbw is not None else fit.busbw,
        step_s=step,
        low_s=max(0.0, step - half),
        high_s=step + half,
        compute_s=compute,
        backward_s=backward / shrink,
        colocation_slowdown=slow,
        data_s=data,
        optimizer_s=optimizer,
        communication_s=comm,
        overlap_s=comm - exposed,
        exposed_s=exposed,
        stolen_s=stolen,
        skew_s=skew,
        speedup=up,
        efficiency=up / world_size,
        serial_fraction=karp_flatt(up, world_size),
    )


def projections(
    model: ScalingModel,
    world_sizes: Sequence[int],
    *,
    bandwidths: Sequence[float | None] = (None,),
    architectures: Sequence[Architecture] = ARCHITECTURES,
) -> list[Projection]:
    """Every combination of world size, bandwidth (None: the measured one) and architecture."""
    return [
        project(model, n, architecture=a, busbw=b)
        for n in world_sizes
        for b in bandwidths
        for a in architectures
    ]
