"""Quality parity: does a candidate recipe still learn like the baseline?

A short training run of a small model is chaotic: two recipes that compute the same function
with their sums in another order (channels_last, compiled kernels, another thread count) or
with bf16 rounding agree for a few steps, then their per-step losses drift apart by tens of
percent, while both learn equally well. A fixed tolerance per safety class cannot tell that
drift from harm, and where the drift falls depends on the machine (on one CPU bf16 and
channels_last moved the late loss by -29% and -24% and were wrongly rejected).

So the yardstick is measured, once per study: the baseline recipe is trained again from the
same seed, on the same data in the same order, `REFERENCE_RUNS` times with a no-op
perturbation of its initial weights (one bf16 rounding, `torchdoctor.engine.perturb`). What
separates those runs from the baseline is exactly what separates a harmless change from it:
a rounding-sized difference, amplified by the chaos of training. The late-window mean loss of
the n = 1 + REFERENCE_RUNS baseline runs (mean m, standard deviation s) defines the spread a
harmless change may show.

The test is a prediction interval: a candidate that trains the same is one more draw from that
distribution, so its late-window mean falls in ``m +- t(n-1, 1 - alpha/2) * s * sqrt(1 + 1/n)``
with probability 1 - alpha (Student's t, the normal-theory prediction interval for one new
observation). `exact` and `close` changes must stay inside it on both sides (a loss far below
the baseline's means the math changed too); `semantic` changes (batch size, accumulation) only
must not rise above ``m + t(n-1, 1 - alpha) * s * sqrt(1 + 1/n)``, since a larger batch
legitimately lowers the loss per step. The interval is never narrower than the class's
numerical floor (`TOLERANCES`, relative to m), so a workload whose runs happen to agree to
many digits does not hold bf16 to that.

The window is the late half of the first `steps` losses: early losses are dominated by the
initialisation all runs share. A non-finite loss anywhere rejects at once.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from scipy import stats

from torchdoctor.core.vocabulary import Safety
from torchdoctor.tune.band_records import BandBound, QualityBand

#: Baseline runs with a no-op perturbation, besides the baseline itself. With n = 7 runs the
#: 99% two-sided t quantile is 3.71 (6 degrees of freedom); 11 runs would only bring it to
#: 3.17 for two thirds more cost, 4 runs would leave it at 5.84.
REFERENCE_RUNS: Final = 6

#: Confidence of the prediction interval: a change that trains the same is rejected at most
#: 1% of the time. Only a proven speed win reaches this check (a handful per study), so the
#: chance that a study loses a good change to it stays around 5%; a harmful change moves the
#: late loss by many reference standard deviations (a 10x learning rate or a frozen backbone:
#: 9 to 20 on `cnn`) and is rejected at any confidence.
QUALITY_CONFIDENCE: Final = 0.99

#: Smallest half-width of the acceptance interval, relative to the reference mean: the
#: numerical effect each class may have even where the reference runs agree closely.
#: `exact` knobs do the same math up to reassociation (~1e-6 relative per step in fp32), which
#: stays below 1e-3 over tens of steps. `close` and `semantic` changes: mixed-precision
#: training matches fp32 loss curves within a few percent (Micikevicius et al., 2018, "Mixed
#: Precision Training"), 5%.
EXACT_TOLERANCE: Final = 1e-3
CLOSE_TOLERANCE: Final = 0.05
SEMANTIC_TOLERANCE: Final = 0.05

TOLERANCES: Final[dict[Safety, float]] = {
    "exact": EXACT_TOLERANCE,
    "close": CLOSE_TOLERANCE,
    "semantic": SEMANTIC_TOLERANCE,
}

#: Safety classes ordered from strictest to loosest; a change of several knobs is judged by
#: its loosest class.
SAFETY_ORDER: Final[tuple[Safety, ...]] = ("exact", "close", "semantic")

#: Safety classes held to the interval in one direction only: a lower loss is no regression.
ONE_SIDED: Final[frozenset[Safety]] = frozenset({"semantic"})

#: Guard against dividing by a loss that is (nearly) zero.
_LOSS_FLOOR: Final = 1e-12


@dataclass(frozen=True)
class ParityResult:
    passed: bool
    #: Signed relative difference of the late means, candidate vs the unperturbed baseline
    #: (negative: the candidate's loss is lower).
    deviation: float | None
    #: The class's floor (relative to the reference mean).
    tolerance: float
    reason: str
    #: Half-width of the acceptance interval, relative to the reference mean.
    limit: float | None = None


@dataclass(frozen=True)
class QualityReference:
    """Late-window mean losses of the baseline (first) and its no-op-perturbed replicas."""

    late_means: tuple[float, ...]
    #: The baseline's first loss (how much a run learned is measured from it).
    first_loss: float
    window: tuple[int, int]

    @classmethod
    def from_trajectories(
        cls,
        baseline: Sequence[float | None],
        references: Sequence[Sequence[float | None]] = (),
        *,
        steps: int,
    ) -> QualityReference:
        """Build from the baseline's losses and the reference runs' (non-finite runs dropped)."""
        k = min(steps, len(baseline))
        window = (k // 2, k)
        means = [late_mean(baseline, window)]
        means += [late_mean(r, window) for r in references]
        finite = tuple(m for m in means if m is not None)
        first = baseline[0] if baseline else None
        return cls(finite, float(first) if first is not None else math.nan, window)

    @property
    def runs(self) -> int:
        return len(self.late_means)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.late_means)

    @property
    def baseline(self) -> float:
        return self.late_means[0]

    @property
    def spread(self) -> float:
        """Sample standard deviation of the late means (0 with fewer than two runs)."""
        return statistics.stdev(self.late_means) if self.runs >= 2 else 0.0

    def half_width(self, *, one_sided: bool, confidence: float = QUALITY_CONFIDENCE) -> float:
        """Half-width of the prediction interval for one more run (0 without replicas)."""
        n = self.runs
        if n < 2:
            return 0.0
        alpha = 1.0 - confidence
        q = 1.0 - alpha if one_sided else 1.0 - alpha / 2.0
        return float(stats.t.ppf(q, n - 1)) * self.spread * math.sqrt(1.0 + 1.0 / n)


def late_mean(losses: Sequence[float | None], window: tuple[int, int]) -> float | None:
    """Mean of `losses[window]`; None when the window is short or holds a non-finite value."""
    values = losses[window[0] : window[1]]
    if len(values) < window[1] - window[0] or window[1] <= window[0]:
        return None
    if first_non_finite(values) is not None:
        return None
    return statistics.fmean(float(v) for v in values if v is not None)


def loosest(classes: Sequence[Safety]) -> Safety:
    """The loosest safety class among `classes` (exact when empty)."""
    if not classes:
        return "exact"
    return max(classes, key=SAFETY_ORDER.index)


def first_non_finite(losses: Sequence[float | None]) -> int | None:
    """Index of the first NaN/inf (or missing) loss, or None when all are finite."""
    for i, loss in enumerate(losses):
        if loss is None or not math.isfinite(loss):
            return i
    return None


def check_parity(
    reference: QualityReference,
    candidate: Sequence[float | None],
    safety: Safety,
    *,
    tolerances: dict[Safety, float] | None = None,
    confidence: float = QUALITY_CONFIDENCE,
) -> ParityResult:
    """Is `candidate`'s late-window loss one more draw of the baseline's own spread?"""
    tolerance = (tolerances or TOLERANCES)[safety]
    bad = first_non_finite(candidate)
    if bad is not None:
        return ParityResult(
            False,
            None,
            tolerance,
            f"the loss became NaN/inf at step {bad}: the change breaks training "
            "(an overflow, or a step that blows up)",
        )
    if reference.runs == 0:
        return ParityResult(False, None, tolerance, "the baseline has no finite loss to compare")
    lo, hi = reference.window
    cand = late_mean(candidate, reference.window)
    if cand is None:
        return ParityResult(
            False, None, tolerance, f"only {len(candidate)} loss value(s), {hi} needed"
        )
    one_sided = safety in ONE_SIDED
    centre = reference.mean
    scale = max(abs(centre), _LOSS_FLOOR)
    half, _ = _half(reference, safety, tolerance, confidence)
    deviation = (cand - reference.baseline) / max(abs(reference.baseline), _LOSS_FLOOR)
    too_high = cand > centre + half
    too_low = not one_sided and cand < centre - half
    if not (too_high or too_low):
        return ParityResult(True, deviation, tolerance, "", half / scale)
    band = (
        f"at most {centre + half:.3g}"
        if one_sided
        else f"between {centre - half:.3g} and {centre + half:.3g}"
    )
    evidence = (
        f"its loss over steps {lo}..{hi - 1} averaged {cand:.3g} ({deviation:+.1%} vs the "
        f"baseline); the baseline trained {reference.runs} times with a rounding-sized change "
        f"averaged {centre:.3g} (sd {reference.spread:.2g}), so a change that trains the same "
        f"lands {band} ({confidence:.0%} prediction interval)"
    )
    reason = _verdict(reference, cand, half) + evidence
    return ParityResult(False, deviation, tolerance, reason, half / scale)


def _half(
    reference: QualityReference, safety: Safety, tolerance: float, confidence: float
) -> tuple[float, BandBound]:
    """The acceptance half-width a class is held to, and which bound set it: the prediction
    interval (the statistic) or the class's floor, whichever is wider."""
    scale = max(abs(reference.mean), _LOSS_FLOOR)
    stat = reference.half_width(one_sided=safety in ONE_SIDED, confidence=confidence)
    floor = tolerance * scale
    return (stat, "statistic") if stat >= floor else (floor, "floor")


def quality_bands(
    reference: QualityReference,
    tolerances: dict[Safety, float] | None = None,
    *,
    confidence: float = QUALITY_CONFIDENCE,
) -> list[QualityBand]:
    """The band each safety class is held to (what `check_parity` applies), strictest first;
    empty without a finite baseline."""
    if reference.runs == 0:
        return []
    tol = tolerances or TOLERANCES
    bands = []
    for safety in SAFETY_ORDER:
        half, set_by = _half(reference, safety, tol[safety], confidence)
        scale = max(abs(reference.mean), _LOSS_FLOOR)
        bands.append(
            QualityBand(
                safety=safety,
                low=None if safety in ONE_SIDED else reference.mean - half,
                high=reference.mean + half,
                set_by=set_by,
                statistic_half=reference.half_width(
                    one_sided=safety in ONE_SIDED, confidence=confidence
                ),
                floor_half=tol[safety] * scale,
                floor_share=tol[safety],
                confidence=confidence,
            )
        )
    return bands


def band_text(band: QualityBand) -> str:
    """One class's band in words: its range and which bound set it."""
    where = f"at most {band.high:.4g}" if band.low is None else f"{band.low:.4g}..{band.high:.4g}"
    if band.set_by == "floor":
        why = (
            f"the class floor of {band.floor_share:.3g} of the mean, wider than the "
            f"statistic's +-{band.statistic_half:.2g}"
        )
    else:
        why = f"the statistic ({band.confidence:.0%} prediction interval)"
    return f"{band.safety} {where}, set by {why}"


def _verdict(reference: QualityReference, cand: float, half: float) -> str:
    """What a deviation means, in words: learning less, not at all, diverging, or otherwise.

    `half` (the interval's half-width) is also how far from its start a run's late loss must
    be before it counts as having moved at all.
    """
    if cand < reference.mean:
        return (
            "its loss falls further than the baseline's can by chance, so it computes "
            "something else: "
        )
    first = reference.first_loss
    learned = first - reference.mean
    if not (math.isfinite(learned) and learned > 0):
        return "its loss is higher than the baseline's: "
    if cand > first + half:
        return "training diverges (its loss ends above where it started): "
    if cand >= first - half:
        return "it stopped learning (its loss stays where it started): "
    return f"it learns {(first - cand) / learned:.0%} as much as the baseline: "


def quality_notes(
    reference: QualityReference, tolerances: dict[Safety, float] | None = None
) -> list[str]:
    """Two lines for the result: the yardstick every candidate's loss was judged by, and the
    band each safety class was actually held to (the statistic or the class floor)."""
    bands = "; ".join(band_text(b) for b in quality_bands(reference, tolerances))
    if reference.runs < 2:
        notes = ["quality judged by the class floors alone: no reference runs were measured"]
        return notes + ([f"quality bands applied: {bands}"] if bands else [])
    lo, hi = reference.window
    two = reference.half_width(one_sided=False)
    return [
        f"quality yardstick: the baseline trained {reference.runs} times with a rounding-sized "
        f"change of its initial weights averaged a loss of {reference.mean:.3g} over steps "
        f"{lo}..{hi - 1} (sd {reference.spread:.2g}); a change that trains the same lands "
        f"within {reference.mean - two:.3g}..{reference.mean + two:.3g} "
        f"({QUALITY_CONFIDENCE:.0%} prediction interval)",
        f"quality bands applied: {bands}",
    ]
