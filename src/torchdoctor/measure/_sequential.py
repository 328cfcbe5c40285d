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
looks is a union of K events, so the looks share the error budget 1 - confidence, and by the
union bound (weighted Bonferroni) the false-accept rate of the whole test stays at most
1 - confidence however the budget is split (`look_confidence`). The last look gets
`LAST_LOOK_SHARE` of it and the earlier looks the rest in equal parts: the early looks stop
clear wins and clear losses, which clear their intervals at any confidence, while the close
calls (a real 4-8% gain) reach the last look, where the interval's width decides them.
Stopping for futility never accepts, so it adds nothing to the false-accept rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

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


#: Share of the error budget the last look gets. An equal split over the 10 looks of the
#: tuner's default schedule put every look at 99.5%, and real 4-5% gains ended undecided at the
#: last look by a hair (cnn's channels_last read 1.044x [1.019, 1.115] against a 1.02x bar on
#: the AMD EPYC host, while the grid put it at 1.15x). Half of 5% makes the last interval a
#: 97.5% one, a fifth narrower in normal units (z 2.24 against 2.81), and costs the nine
#: earlier looks little: they go from 99.5% to 99.72% (z 2.99), and at the first look, 6
#: ratios, a bootstrap interval at either level spans nearly all of them anyway.
LAST_LOOK_SHARE: Final = 0.5


def look_confidence(confidence: float, looks: int, *, last: bool = False) -> float:
    """The interval's confidence at one of `looks` looks (the last one when `last`).

    Accepting at any of K looks is a union of K events, so per-look error rates that sum to
    1 - confidence keep the whole sequential test's false-accept rate at most 1 - confidence
    (weighted Bonferroni). The last look gets `LAST_LOOK_SHARE` of the budget, the others the
    rest in equal parts; a single look gets all of it.
    """
    alpha = 1.0 - confidence
    if looks <= 1:
        return confidence
    if last:
        return 1.0 - alpha * LAST_LOOK_SHARE
    return 1.0 - alpha * (1.0 - LAST_LOOK_SHARE) / (looks - 1)


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

    def look_confidence(self, *, last: bool = False) -> float:
        return look_confidence(self.confidence, len(self.looks()), last=last)

    def look(self, a_scores: Sequence[float], b_scores: Sequence[float]) -> Look | None:
        """The decision after `len(b_scores)` scored rounds; None between two looks."""
        looks = self.looks()
        scored = len(b_scores)
        if scored not in looks:
            return None
        last = scored >= looks[-1]
        confidence = self.look_confidence(last=last)
        estimate = paired_speedup(a_scores, b_scores, confidence=confidence)
        return Look(estimate, speed_verdict(estimate, self.threshold), last)


__all__ = [
    "LAST_LOOK_SHARE",
    "Look",
    "PairedSpeedup",
    "SequentialTest",
    "SpeedVerdict",
    "look_confidence",
    "paired_speedup",
    "sequential_looks",
    "speed_verdict",
]
