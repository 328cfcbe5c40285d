"""`shift_estimate`: how much a quantity moved between two independent sets of samples.

For per-step samples of two separate runs (yesterday's and today's), where no sample of one is
paired with a sample of the other. The estimate is the Hodges-Lehmann shift, the median of all
pairwise differences b_j - a_i, and its interval the distribution-free one that inverts the
Mann-Whitney test (Hollander & Wolfe, *Nonparametric Statistical Methods*, 2nd ed. 1999,
§4.3): the K-th smallest and K-th largest pairwise differences, K from the normal
approximation of the U statistic's null distribution. The test's p-value is scipy's
`mannwhitneyu` (exact for small samples without ties). A difference, not a ratio: a phase
that was zero on one side (no data wait at all) still has a shift.

What the interval covers: the step-to-step spread within each run. Two processes of one job
also differ as a whole (docs/DESIGN.md, "A win is proven twice"), which no per-step interval
sees; a caller judges a shift against a practical minimum as well.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar, Final

import numpy as np
from pydantic import Field

from torchdoctor.core.records import Record

#: Fewest samples per side for an interval: with 3 and 3 the widest distribution-free
#: interval already has a coverage of 90% (1 - 2/20), short of the 95% asked.
MIN_SHIFT_SAMPLES: Final = 4


class Shift(Record):
    """b - a: the Hodges-Lehmann shift, its interval (None: too few samples), the p-value."""

    schema_name: ClassVar[str] = "shift"

    a_median: float
    b_median: float
    shift: float
    ci: tuple[float, float] | None = None
    confidence: float = Field(default=0.95, gt=0, lt=1)
    p_value: float | None = None
    n_a: int
    n_b: int

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval lies wholly on one side of no change."""
        return self.ci is not None and (self.ci[0] > 0.0 or self.ci[1] < 0.0)


def _rank_k(m: int, n: int, confidence: float) -> int:
    """K of the interval: the normal approximation of Mann-Whitney's critical value."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2.0))
    return math.floor(m * n / 2.0 - z * math.sqrt(m * n * (m + n + 1) / 12.0))


def shift_estimate(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95) -> Shift:
    """The shift of b relative to a (positive: b is larger), with its interval and p-value.

    With fewer than `MIN_SHIFT_SAMPLES` on a side the estimate is the difference of medians
    with no interval and no p-value.
    """
    xa = np.asarray(list(a), dtype=np.float64)
    xb = np.asarray(list(b), dtype=np.float64)
    a_med = float(np.median(xa)) if xa.size else math.nan
    b_med = float(np.median(xb)) if xb.size else math.nan
    if min(xa.size, xb.size) < MIN_SHIFT_SAMPLES:
        return Shift(
            a_median=a_med,
            b_median=b_med,
            shift=b_med - a_med,
            n_a=xa.size,
            n_b=xb.size,
            confidence=confidence,
        )
    diffs = np.sort(np.subtract.outer(xb, xa).ravel())
    k = _rank_k(xa.size, xb.size, confidence)
    ci = (float(diffs[max(k, 1) - 1]), float(diffs[diffs.size - max(k, 1)]))
    if np.array_equal(np.sort(xa), np.sort(xb)):
        p = 1.0  # the same samples: scipy's tie correction would divide by zero
    else:
        from scipy.stats import mannwhitneyu

        p = float(mannwhitneyu(xb, xa, alternative="two-sided").pvalue)
    return Shift(
        a_median=a_med,
        b_median=b_med,
        shift=float(np.median(diffs)),
        ci=ci,
        confidence=confidence,
        p_value=p if math.isfinite(p) else 1.0,
        n_a=int(xa.size),
        n_b=int(xb.size),
    )


__all__: list[str] = ["MIN_SHIFT_SAMPLES", "Shift", "shift_estimate"]
