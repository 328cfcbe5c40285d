"""The alpha-beta model of a collective and bus bandwidth: what the microbenchmark's timings
mean.

A collective of `S` bytes takes `t = alpha + beta * S`: a fixed latency (alpha: start-up,
synchronization, one hop per step) plus the bytes over a bandwidth (beta = 1 / algorithm
bandwidth). This is Hockney's model (R. Hockney, "The communication challenge for MPP",
Parallel Computing 20, 1994), the one NCCL's and MPI's cost models start from.

Bus bandwidth follows the NCCL-tests convention (github.com/NVIDIA/nccl-tests,
doc/PERFORMANCE.md): `algbw = S / t`, and `busbw = algbw * factor(N)` where the factor turns
the bytes a collective moves per rank into what one link carries, so busbw is comparable
across world sizes and with the hardware's link speed: all-reduce `2(N-1)/N`, all-gather
`(N-1)/N`, reduce and broadcast `1`. Reduce then broadcast (the parameter-server traffic
pattern: the gradients in to one rank, the parameters back out) moves the bytes twice over the
root's link, so its factor is `2`.

The fit weighs each point by 1/t (least squares on relative errors): the sizes span 1 KB to
64 MB, and an unweighted fit would let the largest sizes decide alpha alone.

A straight line over five binary orders is a poor local description where the cost per byte
changes with the size: a shaped link's token bucket passes the sizes below its burst at the
line rate, TCP's window and a copy's cache behaviour differ between 1 KiB and 64 MiB. Fitted
over every size, the small sizes' flat times pull beta down, and the line predicts the bytes
of a gradient bucket faster than the link carries them (benchmarks/RESULTS.md, session 19: at
400 Mbit/s, a 0.6 MB all-reduce measured 14.1 ms in the job, 11.5 ms from a fit over 1 KiB to
4 MiB, below the 12.1 ms the nominal rate alone allows; TCP's payload is 1448 of each 1514
bytes tbf counts, before the ACKs sharing the link). The
scaling model therefore evaluates each bucket with `fit_near`: the same fit over the measured
sizes that bracket the buckets (the largest size at or below the smallest bucket to the
smallest at or above the largest), widened to larger sizes first (they are bandwidth-bound,
which a bucket of gradients is) until it holds `MIN_FIT_POINTS` sizes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, Literal

import numpy as np
from scipy.optimize import nnls

from torchdoctor.core.errors import MeasureError
from torchdoctor.core.records import SubRecord

Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "reduce_broadcast"]
COLLECTIVES: Final[tuple[Collective, ...]] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "reduce_broadcast",
)

#: Fewer points than this leave a two-parameter fit no degrees of freedom for its error.
MIN_FIT_POINTS: Final = 3


def bus_factor(collective: Collective, world_size: int) -> float:
    """busbw / algbw for `collective` at `world_size` ranks (NCCL-tests, doc/PERFORMANCE.md)."""
    if world_size < 1:
        raise MeasureError(f"world size must be at least 1, got {world_size}")
    n = world_size
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    return 2.0  # reduce (factor 1) then broadcast (factor 1), in sequence over the root's link


def bus_bandwidth(
    collective: Collective, world_size: int, size_bytes: float, time_s: float
) -> float:
    """Bus bandwidth in bytes/s of one timed collective (algbw times `bus_factor`)."""
    if time_s <= 0:
        raise MeasureError(f"a collective's time must be positive, got {time_s}")
    return size_bytes / time_s * bus_factor(collective, world_size)


class AlphaBetaFit(SubRecord):
    """`t = alpha + beta * S` fitted to one collective's timings at one world size.

    `alpha_se`, `beta_se`, `cov_alpha_beta`: the parameters' standard errors and covariance
    from the weighted least squares; `rel_rms_residual`: the root mean square of the points'
    relative residuals (how far one prediction typically lies from a measured time).
    """

    collective: Collective
    world_size: int
    points: int
    alpha_s: float
    beta_s_per_byte: float
    alpha_se: float
    beta_se: float
    cov_alpha_beta: float
    rel_rms_residual: float
    #: The smallest and largest size fitted (None: an older record, every size measured).
    sizes_fitted: tuple[int, int] | None = None

    @property
    def algbw(self) -> float:
        """Asymptotic algorithm bandwidth, bytes/s (inf when the fit found no size cost)."""
        return 1.0 / self.beta_s_per_byte if self.beta_s_per_byte > 0 else math.inf

    @property
    def busbw(self) -> float:
        """Asymptotic bus bandwidth, bytes/s: the link speed the fit implies."""
        return self.algbw * bus_factor(self.collective, self.world_size)

    def predict(self, size_bytes: float) -> float:
        return self.alpha_s + self.beta_s_per_byte * size_bytes

    def predict_se(self, size_bytes: float) -> float:
        """Standard error of one predicted time: the parameters' spread plus the points'
        own scatter around the line."""
        s = size_bytes
        var = self.alpha_se**2 + (s * self.beta_se) ** 2 + 2 * s * self.cov_alpha_beta
        scatter = self.rel_rms_residual * self.predict(s)
        return math.sqrt(max(var, 0.0) + scatter**2)


def fit_alpha_beta(
    collective: Collective,
    world_size: int,
    sizes_bytes: Sequence[float],
    times_s: Sequence[float],
) -> AlphaBetaFit:
    """Weighted least squares of `times_s` on `sizes_bytes` (weights 1/t, see the module)."""
    sizes = np.asarray(sizes_bytes, dtype=np.float64)
    times = np.asarray(times_s, dtype=np.float64)
    if sizes.shape != times.shape or sizes.size < MIN_FIT_POINTS:
        raise MeasureError(
            f"an alpha-beta fit needs at least {MIN_FIT_POINTS} (size, time) pairs, "
            f"got {sizes.size} sizes and {times.size} times"
        )
    if np.any(times <= 0) or not np.all(np.isfinite(times)):
        raise MeasureError("a collective's times must be positive and finite")
    if np.unique(sizes).size < 2:
        raise MeasureError("an alpha-beta fit needs at least two different sizes")
    w = 1.0 / times
    design = np.column_stack([np.ones_like(sizes), sizes]) * w[:, None]
    target = times * w  # = 1: each point's time relative to itself
    # non-negative least squares: a latency or a cost per byte below zero has no meaning, and
    # a noisy host can push an unconstrained fit there (it equals lstsq when both are >= 0)
    coef, _ = nnls(design, target)
    alpha, beta = float(coef[0]), float(coef[1])
    rel_resid = (alpha + beta * sizes - times) / times
    dof = sizes.size - 2
    sigma2 = float(np.sum(rel_resid**2)) / dof if dof > 0 else 0.0
    cov = sigma2 * np.linalg.inv(design.T @ design)
    return AlphaBetaFit(
        collective=collective,
        world_size=world_size,
        points=int(sizes.size),
        sizes_fitted=(int(sizes.min()), int(sizes.max())),
        alpha_s=alpha,
        beta_s_per_byte=beta,
        alpha_se=math.sqrt(max(float(cov[0, 0]), 0.0)),
        beta_se=math.sqrt(max(float(cov[1, 1]), 0.0)),
        cov_alpha_beta=float(cov[0, 1]),
        rel_rms_residual=math.sqrt(float(np.mean(rel_resid**2))),
    )


def sizes_near(measured: Sequence[int], targets: Sequence[float]) -> list[int]:
    """The measured sizes `fit_near` fits for `targets` (see the module): those bracketing
    the targets, widened to larger sizes, then to smaller, up to `MIN_FIT_POINTS`."""
    sizes = sorted(set(measured))
    if not targets or len(sizes) <= MIN_FIT_POINTS:
        return sizes
    below = [i for i, s in enumerate(sizes) if s <= min(targets)]
    above = [i for i, s in enumerate(sizes) if s >= max(targets)]
    lo = below[-1] if below else 0
    hi = above[0] if above else len(sizes) - 1
    while hi - lo + 1 < MIN_FIT_POINTS:
        if hi < len(sizes) - 1:
            hi += 1
        else:
            lo -= 1
    return sizes[lo : hi + 1]


def fit_near(
    collective: Collective,
    world_size: int,
    sizes_bytes: Sequence[int],
    times_s: Sequence[float],
    targets: Sequence[float],
) -> AlphaBetaFit:
    """`fit_alpha_beta` over the sizes near `targets` (`sizes_near`; see the module)."""
    keep = set(sizes_near(sizes_bytes, targets))
    pairs = [(s, t) for s, t in zip(sizes_bytes, times_s, strict=True) if s in keep]
    return fit_alpha_beta(collective, world_size, [s for s, _ in pairs], [t for _, t in pairs])
