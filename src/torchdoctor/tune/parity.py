"""Quality parity: does a candidate recipe still learn like the fp32 eager baseline?

Both recipes train the same K steps from the same seed (same data, same initial weights). We
compare the *late* part of the two loss trajectories (the mean over the last half of the K
steps) rather than step-by-step values: early losses are dominated by the initialization both
share, and single steps are noisy for semantic changes (a different batch size sees different
samples per step). A non-finite loss anywhere rejects at once.

The deviation is ``(mean(candidate_late) - mean(baseline_late)) / |mean(baseline_late)|``,
signed (negative: the candidate's loss is lower). Its size must not exceed the tolerance of the
change's safety class plus a batch-noise allowance, in either direction for `exact` and
`close` changes (which must compute the same thing) and upwards only for `semantic` ones
(see SEMANTIC_TOLERANCE). The allowance is there because a
short, high-learning-rate run is chaotic (two recipes whose first steps agree to 4 digits can
differ by 0.3 in single-batch loss ten steps later, measured on the `cnn` workload under
torch.compile), so two late means differ by chance with a standard error we estimate from the
trajectories themselves. The per-step noise variance is taken from successive differences,
``var(diff(late)) / 2``, which ignores the smooth downward trend of a learning curve.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

SafetyClass = Literal["exact", "close", "semantic"]

#: `exact` knobs do the same math (data loading, pinned memory, set_to_none, threads). Only
#: floating-point reassociation may differ (different reduction order with a different thread
#: count), which moves an fp32 loss by ~1e-6 relative per step; over tens of steps of SGD the
#: drift stays well below 1e-3 (0.1%). Anything larger means the math changed.
EXACT_TOLERANCE: Final = 1e-3

#: `close` knobs change numerics on purpose (bf16/fp16 autocast, torch.compile's fused
#: kernels, TF32). bf16 keeps 8 mantissa bits (relative rounding 2^-8 ~ 0.4% per op), and mixed
#: precision training papers (Micikevicius et al., 2018, "Mixed Precision Training") report loss
#: curves matching fp32 within a few percent; 5% of the late loss admits that and rejects an
#: overflow, a stall or a divergence.
CLOSE_TOLERANCE: Final = 0.05

#: `semantic` knobs change the training dynamics (batch size, accumulation): the loss after K
#: steps legitimately differs because each step sees a different number of samples, and a
#: larger batch's loss per step is *lower* (cnn, batch 32 -> 64, seed 0: -67% over steps
#: 16..31), so for these only a higher loss counts against the change. 25% above the baseline
#: catches a diverging or stalled run (which moves the late loss by far more on our workloads)
#: while admitting the noise of a short, chaotic run.
SEMANTIC_TOLERANCE: Final = 0.25

TOLERANCES: Final[dict[SafetyClass, float]] = {
    "exact": EXACT_TOLERANCE,
    "close": CLOSE_TOLERANCE,
    "semantic": SEMANTIC_TOLERANCE,
}

#: Standard errors of the difference of the two late means allowed as chance (two-sided ~95%
#: for a normal difference): deviations inside this are indistinguishable from batch noise.
NOISE_Z: Final = 2.0

#: Safety classes ordered from strictest to loosest; a change of several knobs is judged by
#: its loosest class.
SAFETY_ORDER: Final[tuple[SafetyClass, ...]] = ("exact", "close", "semantic")

#: Guard against dividing by a baseline loss that is (nearly) zero.
_LOSS_FLOOR: Final = 1e-12


#: Safety classes held to their tolerance in one direction only: a lower loss is no regression.
ONE_SIDED: Final[frozenset[SafetyClass]] = frozenset({"semantic"})


@dataclass(frozen=True)
class ParityResult:
    passed: bool
    #: Signed relative difference of the late means (negative: the candidate's loss is lower).
    deviation: float | None
    tolerance: float
    reason: str
    limit: float | None = None


def loosest(classes: Sequence[SafetyClass]) -> SafetyClass:
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
    baseline: Sequence[float | None],
    candidate: Sequence[float | None],
    safety: SafetyClass,
    *,
    steps: int,
    tolerances: dict[SafetyClass, float] | None = None,
) -> ParityResult:
    """Compare the first `steps` losses of `candidate` with the baseline's."""
    tolerance = (tolerances or TOLERANCES)[safety]
    bad = first_non_finite(candidate)
    if bad is not None:
        return ParityResult(False, None, tolerance, f"non-finite loss at step {bad}")
    k = min(steps, len(baseline), len(candidate))
    if k < 2:
        return ParityResult(False, None, tolerance, f"only {k} loss value(s) to compare")
    base_late = [float(v) for v in baseline[k // 2 : k] if v is not None]
    cand_late = [float(v) for v in candidate[k // 2 : k] if v is not None]
    base_mean = sum(base_late) / len(base_late)
    cand_mean = sum(cand_late) / len(cand_late)
    scale = max(abs(base_mean), _LOSS_FLOOR)
    deviation = (cand_mean - base_mean) / scale
    std_err = math.sqrt(
        _step_noise_var(base_late) / len(base_late) + _step_noise_var(cand_late) / len(cand_late)
    )
    allowance = NOISE_Z * std_err / scale
    limit = tolerance + allowance
    excess = deviation if safety in ONE_SIDED else abs(deviation)
    if excess > limit:
        bound = f"+{limit:.1%}" if safety in ONE_SIDED else f"{limit:.1%} either way"
        return ParityResult(
            False,
            deviation,
            tolerance,
            f"loss deviates {deviation:+.1%} from the baseline over steps {k // 2}..{k - 1} "
            f"(limit {bound}: {tolerance:.1%} for a {safety} change + {allowance:.1%} "
            "batch noise)",
            limit,
        )
    return ParityResult(True, deviation, tolerance, "", limit)


def _step_noise_var(values: Sequence[float]) -> float:
    """Per-step noise variance from successive differences (insensitive to a smooth trend)."""
    if len(values) < 3:
        return 0.0
    diffs = [b - a for a, b in itertools.pairwise(values)]
    return statistics.variance(diffs) / 2.0
