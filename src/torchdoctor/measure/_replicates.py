"""The speedup a new process sees: B over A from replicated pairs of fresh processes.

Two processes running the same code are not equally fast: where the allocator places memory,
which cores and cache the threads land on, what the first steps left behind. On this
project's 2-core hosts fresh `torchdoctor run` processes of one recipe measured 345 to 467
samples/s, while the chunks of one live process agree within a few percent. An interval built
from the chunks of one pair of processes (`paired_speedup`) is therefore an interval for *that
pair*, and a user who runs the recipe again in new processes sees a ratio outside it more
often than its confidence says (a cnn recipe claimed [1.45, 1.67] and re-measured 1.35).

The replicate here is a pair of fresh processes, one per recipe, run back to back so that
they share the machine's state of the moment; its ratio a_i / b_i of per-process scores (time
per unit of work) is one observation. Ratios are compared on a log scale, where a 2x gain
and a 2x loss are symmetric and the spread of ratios is close to normal: the estimate is the
geometric mean of the ratios and the interval is Student's t interval of the mean log ratio
with n - 1 degrees of freedom, which is exact for normal log ratios and honest for three or
four replicates, where a bootstrap interval of a median is not (its ends are the extreme
ratios).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

# The replicates' counts are shared with the commands' defaults (core/defaults.py).
from torchdoctor.core.defaults import DEFAULT_REPLICATES as DEFAULT_REPLICATES
from torchdoctor.core.defaults import MIN_REPLICATES as MIN_REPLICATES
from torchdoctor.core.errors import MeasureError
from torchdoctor.measure._sequential import PairedSpeedup


def replicated_speedup(
    a_scores: Sequence[float], b_scores: Sequence[float], *, confidence: float
) -> PairedSpeedup:
    """The speedup of B over A from replicated process pairs (> 1: B faster).

    `a_scores[i]` and `b_scores[i]` are the scores (time per unit of work) of the i-th pair
    of fresh processes. Raises MeasureError with fewer than `MIN_REPLICATES` usable pairs.
    """
    from scipy import stats

    logs = [math.log(a / b) for a, b in zip(a_scores, b_scores, strict=True) if a > 0 and b > 0]
    if len(logs) < MIN_REPLICATES:
        raise MeasureError(
            f"{len(logs)} process pairs cannot give an interval",
            hint=f"measure at least {MIN_REPLICATES}",
        )
    mean = statistics.fmean(logs)
    half = (
        float(stats.t.ppf(0.5 + confidence / 2, len(logs) - 1))
        * statistics.stdev(logs)
        / math.sqrt(len(logs))
    )
    return PairedSpeedup(math.exp(mean), math.exp(mean - half), math.exp(mean + half), confidence)


def replicates_agree(
    claim_ratios: Sequence[float], again_ratios: Sequence[float], *, confidence: float
) -> bool:
    """Whether a re-measure's pair ratios agree with a claim's (both B over A, > 1: B faster).

    Re-measuring a claim in new fresh pairs is a second sample of the same ratio, with a
    spread of its own: its estimate can fall outside the claim's interval where its pairs are
    spread wider than the claim's few pairs happened to be. The two samples agree unless
    Welch's t-test on their log ratios (normal on a log scale, as for `replicated_speedup`;
    unequal variances, since a claim's pairs and a later re-measure's need not share a
    spread) rejects equal means at `confidence`. Raises MeasureError with fewer than
    `MIN_REPLICATES` positive ratios on either side.
    """
    from scipy import stats

    samples = [[math.log(r) for r in ratios if r > 0] for ratios in (claim_ratios, again_ratios)]
    if min(len(s) for s in samples) < MIN_REPLICATES:
        raise MeasureError(
            "too few process pairs to compare a re-measure with its claim",
            hint=f"measure at least {MIN_REPLICATES} on each side",
        )
    if all(statistics.pvariance(s) == 0 for s in samples):
        return samples[0][0] == samples[1][0]  # no spread: the same ratio or not at all
    test = stats.ttest_ind(samples[0], samples[1], equal_var=False)
    return float(test.pvalue) >= 1 - confidence
