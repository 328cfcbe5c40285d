"""`compare_samples`: is a candidate faster or slower than a baseline, and by how much?

The estimate is the ratio of medians, speedup = median(baseline) / median(candidate) (above 1
means the candidate is faster), with a percentile-bootstrap confidence interval.

A verdict other than "no_significant_difference" needs two things, as in asv's and pyperf's
comparisons: the interval must exclude 1 (statistical significance) *and* the point estimate
must differ from 1 by at least `min_effect` (practical significance). The second condition
is what keeps the false-positive rate controlled on a real machine: the bootstrap assumes
independent samples, but real timings share slow drifts (frequency scaling, other tenants,
memory placement) that bias one side by a fraction of a percent and make a pure interval test
fire more often than its nominal level on long runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Final, Literal

import numpy as np
from pydantic import Field

from torchdoctor.core.errors import MeasureError
from torchdoctor.core.records import Record
from torchdoctor.measure._resample import BOOTSTRAP_RESAMPLES, median_ci, ratio_of_medians_ci

Verdict = Literal["faster", "slower", "no_significant_difference"]

#: Smallest relative change that gets a verdict (practical significance). Identical code timed
#: twice on a shared CPU differs by up to ~1-2% from drift alone (pyperf's "system noise"
#: guidance, https://pyperf.readthedocs.io/en/latest/system.html; benchmarks/bench_compare.py
#: measures it here), and no tuning knob is worth keeping for less than 2%. With a 95% interval
#: alone the false-positive rate is the nominal 5%; the margin brings it well below that once
#: the interval is narrower than the margin (see tests/unit/measure/test_compare.py).
DEFAULT_MIN_EFFECT: Final = 0.02

#: Fewer samples per side cannot support a percentile-bootstrap interval of a median.
MIN_SAMPLES_PER_SIDE: Final = 3


class RatioEstimate(Record):
    """speedup = median(baseline) / median(candidate), its interval, and the verdict."""

    schema_name: ClassVar[str] = "ratio_estimate"

    speedup: float
    ci_low: float
    ci_high: float
    confidence: float = Field(gt=0, lt=1)
    verdict: Verdict
    baseline_median: float
    candidate_median: float
    n_baseline: int
    n_candidate: int
    min_effect: float = DEFAULT_MIN_EFFECT

    @property
    def percent_change(self) -> float:
        """Candidate time relative to baseline, in percent (negative = faster)."""
        return (1.0 / self.speedup - 1.0) * 100.0 if self.speedup > 0 else float("inf")


def ratio_verdict(speedup: float, low: float, high: float, min_effect: float) -> Verdict:
    """The verdict of a speedup and its interval: the one faster/slower rule of the project.

    Faster or slower only when the interval excludes 1 *and* the estimate differs from 1 by at
    least `min_effect` (see the module docstring).
    """
    if low > 1.0 and speedup >= 1.0 + min_effect:
        return "faster"
    if high < 1.0 and speedup <= 1.0 / (1.0 + min_effect):
        return "slower"
    return "no_significant_difference"


def _validated(samples: Sequence[float], side: str) -> np.ndarray:
    data = np.asarray(list(samples), dtype=np.float64)
    if data.size < MIN_SAMPLES_PER_SIDE:
        raise MeasureError(
            f"{side} has {data.size} sample(s); at least {MIN_SAMPLES_PER_SIDE} are needed "
            "to compare",
            hint="measure for longer",
        )
    if not np.all(np.isfinite(data)) or np.any(data <= 0):
        raise MeasureError(f"{side} samples must be positive, finite seconds")
    return data


def compare_samples(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    confidence: float = 0.95,
    seed: int = 0,
    min_effect: float = DEFAULT_MIN_EFFECT,
    resamples: int = BOOTSTRAP_RESAMPLES,
    paired: bool = False,
) -> RatioEstimate:
    """Compare per-call (or per-step) times of a candidate against a baseline.

    The verdict is "faster"/"slower" only when the `confidence` interval of the speedup
    excludes 1 and the speedup is at least `min_effect` away from 1 (see module docstring).

    With `paired=True` the i-th baseline and candidate samples were taken together (one
    interleaved round each, in random order within the round): the speedup is then the median
    of the per-round ratios and its interval a bootstrap of that median. A slow drift of the
    machine (another tenant, frequency scaling) moves both samples of a round alike and cancels
    in their ratio, so the paired interval is far narrower under drift, at no cost in bias:
    the random order within a round leaves no side favoured.
    """
    if not 0.0 < confidence < 1.0:
        raise MeasureError(f"confidence {confidence!r} is not between 0 and 1", hint="e.g. 0.95")
    if min_effect < 0:
        raise MeasureError(f"min_effect {min_effect!r} must not be negative")
    base = _validated(baseline, "baseline")
    cand = _validated(candidate, "candidate")
    base_median = float(np.median(base))
    cand_median = float(np.median(cand))
    if paired:
        if base.size != cand.size:
            raise MeasureError(
                f"paired comparison needs one candidate sample per baseline sample, got "
                f"{base.size} and {cand.size}"
            )
        ratios = base / cand
        speedup = float(np.median(ratios))
        low, high = median_ci(ratios, confidence=confidence, seed=seed, resamples=resamples)
    else:
        speedup = base_median / cand_median
        low, high = ratio_of_medians_ci(
            base, cand, confidence=confidence, seed=seed, resamples=resamples
        )
    return RatioEstimate(
        speedup=speedup,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        verdict=ratio_verdict(speedup, low, high, min_effect),
        baseline_median=base_median,
        candidate_median=cand_median,
        n_baseline=int(base.size),
        n_candidate=int(cand.size),
        min_effect=min_effect,
    )
