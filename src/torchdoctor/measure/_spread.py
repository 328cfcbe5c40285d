"""How much two processes of one recipe differ, and whether a win needs a second pair for it.

A ladder win is proven by the paired chunks of *one* pair of processes, and two processes of
one recipe can differ by themselves (`_replicates.py` says why). A second pair of fresh
processes draws that difference afresh; it is worth its cost (on a GPU two process starts of
about 10 s each, the H200 records of 2026-11-28) only where the difference could have made
the win.

The statistic, `ProcessSpread`: the between-process standard deviation sigma of a recipe's log
rate, from pairs of processes of one recipe the study has measured (a log rate ratio d of two
such processes has variance 2 sigma^2, so sigma^2 is estimated by mean(d^2) / 2 with one
degree of freedom per pair), and its upper confidence bound from the chi-square distribution
(`upper`).

The decision, `second_pair_needed`: the first pair's interval puts the win's log size at least
log(ci_low). A do-nothing change reads that much only when its two processes differ by it,
which a normal difference of sd sqrt(2) sigma exceeds with probability below 1 - confidence
once log(ci_low) > z * sqrt(2) * sigma_upper (`process_margin` >= z). Below that, or with no
pair measured yet, the second pair runs, as it always did.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class ProcessSpread:
    """Between-process sd of a log rate (`sd`), from `pairs` pairs of processes of a recipe."""

    sd: float
    pairs: int

    def upper(self, confidence: float) -> float:
        """One-sided upper confidence bound of the sd (chi-square with `pairs` degrees of
        freedom): with one pair it is 6.3x the estimate at 90%, with four 2.1x."""
        from scipy import stats

        low_quantile = float(stats.chi2.ppf(1.0 - confidence, self.pairs))
        return self.sd * math.sqrt(self.pairs / low_quantile) if low_quantile > 0 else math.inf


def process_spread(log_ratios: Sequence[float]) -> ProcessSpread | None:
    """The spread from log rate ratios of pairs of processes of one recipe (None: none yet)."""
    finite = [d for d in log_ratios if math.isfinite(d)]
    if not finite:
        return None
    return ProcessSpread(math.sqrt(sum(d * d for d in finite) / (2 * len(finite))), len(finite))


def process_margin(ci_low: float, spread: ProcessSpread, *, confidence: float) -> float:
    """How many sds of a two-process difference (sqrt(2) x the spread's upper bound) the
    first pair's lower end lies above no change (inf when the processes never differ)."""
    if ci_low <= 0:
        return -math.inf
    scale = math.sqrt(2) * spread.upper(confidence)
    return math.log(ci_low) / scale if scale > 0 else math.inf


def second_pair_needed(ci_low: float, spread: ProcessSpread | None, *, confidence: float) -> bool:
    """Whether a win whose first pair's interval starts at `ci_low` needs a second pair of
    fresh processes: without a measured spread, or where the spread could have made it."""
    if spread is None:
        return True
    return process_margin(ci_low, spread, confidence=confidence) < NormalDist().inv_cdf(confidence)
