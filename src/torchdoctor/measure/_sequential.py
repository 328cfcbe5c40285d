"""Is B faster than A? The sequential, interleaved, paired A/B and its decision at each look.

Two arms run chunks in turn, A B A B ..., one chunk each per round (who goes first alternates
between rounds). A chunk's score is a time per unit of work (seconds per sample or per step),
so the speedup of B over A in round i is a_i / b_i, and the estimate is the median of these
per-round ratios with the percentile-bootstrap interval of that median (`summarize`).

Why paired: the two chunks of a round run back to back and share whatever the machine was
doing then; their ratio cancels it. A load spike from another process that slows both sides
10x moves an unpaired ratio of medians a lot and a paired ratio hardly at all (on this
project's busy 2-core host, unpaired 95% intervals of a torch.compile trial spanned
[0.17, 18]; the paired ones a few tens of percent). `measure.compare` pairs its interleaved
rounds the same way (`compare_samples(paired=True)`); only samples that were not taken in
rounds are compared unpaired (`_resample.ratio_of_medians_ci`).

Sequential: the interval is looked at after `min_rounds` scored rounds, then every
`look_every` rounds up to `rounds` (`sequential_looks`). At a look the estimate is "faster"
when the interval's lower end clears the threshold (1 + the smallest gain worth having),
"futile" when its upper end falls below it (it cannot be a win), and "undecided" otherwise;
the test stops at the first look that is not undecided, or at the last. Accepting at any of K
looks is a union of K events, so each look's interval is taken at the Bonferroni-adjusted
confidence 1 - (1 - confidence) / K (`look_confidence`), which keeps the false-accept rate of
the whole test at most 1 - confidence. Stopping for futility never accepts, so it adds
nothing to that rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from torchdoctor.core.load import MachineLoad
from torchdoctor.measure._measurement import summarize

#: "faster": proven (interval above the threshold); "futile": cannot be a win (interval below
#: it); "undecided": neither, at the level of confidence asked for.
SpeedVerdict = Literal["faster", "futile", "undecided"]


def sequential_looks(*, min_rounds: int, rounds: int, look_every: int) -> list[int]:
    """Scored-round counts at which the sequential A/B looks at its interval.

    The first look is at `min_rounds` (at least 3: fewer ratios cannot support a bootstrap
    interval of their median), the last at `rounds`.
    """
    first = min(max(min_rounds, 3), rounds)
    return [*range(first, rounds, max(look_every, 1)), rounds]


def look_confidence(confidence: float, looks: int) -> float:
    """Per-look confidence: Bonferroni over `looks` looks keeps the family-wise error rate.

    Accepting at any of K looks is a union of K events; each at most (1 - confidence) / K
    keeps the whole sequential test's false-accept rate at most 1 - confidence.
    """
    return 1.0 - (1.0 - confidence) / max(looks, 1)


@dataclass(frozen=True)
class PairedSpeedup:
    """Median over interleaved rounds of a_i / b_i (> 1: B faster) and its interval."""

    speedup: float
    ci_low: float
    ci_high: float
    confidence: float
    #: Other work on the machine during the comparison's scored rounds (None: not read).
    load: MachineLoad | None = None
    #: Comparisons discarded because the machine was disturbed, before this one.
    remeasured: int = 0


def paired_speedup(
    a_scores: Sequence[float], b_scores: Sequence[float], *, confidence: float
) -> PairedSpeedup:
    """The paired speedup of B over A from per-round scores (time per unit of work).

    `a_scores[i]` and `b_scores[i]` are the two chunks of round i; a round whose B score is
    not positive carries no ratio.
    """
    ratios = [a / b for a, b in zip(a_scores, b_scores, strict=True) if b > 0]
    m = summarize(ratios, label="paired speedup", confidence=confidence)
    return PairedSpeedup(m.median, m.ci_low, m.ci_high, confidence)


def speed_verdict(estimate: PairedSpeedup, threshold: float) -> SpeedVerdict:
    """Whether `estimate`'s interval proves a speedup above `threshold`, rules it out, or not."""
    if estimate.ci_low > threshold:
        return "faster"
    if estimate.ci_high < threshold:
        return "futile"
    return "undecided"


@dataclass(frozen=True)
class Look:
    """The sequential A/B at one look: the estimate, its verdict, and whether to stop."""

    estimate: PairedSpeedup
    verdict: SpeedVerdict
    last: bool

    @property
    def stop(self) -> bool:
        return self.verdict != "undecided" or self.last


@dataclass(frozen=True)
class SequentialTest:
    """The looks and the threshold of one sequential A/B (see the module docstring)."""

    threshold: float
    confidence: float = 0.95
    rounds: int = 24
    min_rounds: int = 6
    look_every: int = 2

    def looks(self) -> list[int]:
        return sequential_looks(
            min_rounds=self.min_rounds, rounds=self.rounds, look_every=self.look_every
        )

    def look_confidence(self) -> float:
        return look_confidence(self.confidence, len(self.looks()))

    def look(self, a_scores: Sequence[float], b_scores: Sequence[float]) -> Look | None:
        """The decision after `len(b_scores)` scored rounds; None between two looks."""
        looks = self.looks()
        scored = len(b_scores)
        if scored not in looks:
            return None
        estimate = paired_speedup(a_scores, b_scores, confidence=self.look_confidence())
        return Look(estimate, speed_verdict(estimate, self.threshold), scored >= looks[-1])


__all__ = [
    "Look",
    "PairedSpeedup",
    "SequentialTest",
    "SpeedVerdict",
    "look_confidence",
    "paired_speedup",
    "sequential_looks",
    "speed_verdict",
]
