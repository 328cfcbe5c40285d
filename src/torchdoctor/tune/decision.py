"""The one decision on a measured candidate: does it train, is it faster, does it learn alike?

Used by every trial that measures a recipe: a ladder step (speed proven by the sequential A/B
against the current best, `torchdoctor.measure.SequentialTest`) and a joint-search trial
(measured alone, so with no speed verdict). In order:

1. a NaN/inf loss fails the trial (status "nan", `Outcome.NAN`);
2. a speed verdict other than "faster" rejects it (not a proven win, `Outcome.NOT_FASTER`);
3. a loss trajectory outside the baseline's own spread rejects it (`tune.parity`,
   `Outcome.QUALITY`);
4. otherwise it is accepted (`Outcome.KEPT` on the ladder, `Outcome.MEASURED` in the joint
   search).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torchdoctor.measure import PairedSpeedup, speed_verdict
from torchdoctor.tune.outcome import QUALITY, Outcome, Verdict
from torchdoctor.tune.parity import ParityResult, first_non_finite

__all__ = ["SpeedCheck", "Verdict", "judge"]


@dataclass(frozen=True)
class SpeedCheck:
    """A paired speedup and the threshold it had to clear."""

    estimate: PairedSpeedup
    threshold: float

    @property
    def faster(self) -> bool:
        return speed_verdict(self.estimate, self.threshold) == "faster"

    def reason(self) -> str:
        est = self.estimate
        return (
            f"not a proven win: speedup {est.speedup:.3f}x, {est.confidence:.1%} CI "
            f"[{est.ci_low:.3f}, {est.ci_high:.3f}] does not clear {self.threshold:.2f}x"
        )


def judge(
    losses: Sequence[float | None],
    *,
    speed: SpeedCheck | None,
    parity: Callable[[Sequence[float | None]], ParityResult],
    accepted: Outcome,
) -> Verdict:
    """The verdict on a candidate (see the module docstring); `parity` runs only if needed."""
    bad = first_non_finite(losses)
    if bad is not None:
        return Verdict("nan", Outcome.NAN, f"loss is NaN/inf at step {bad}")
    if speed is not None and not speed.faster:
        return Verdict("ok", Outcome.NOT_FASTER, speed.reason())
    check = parity(losses)
    if not check.passed:
        return Verdict("ok", Outcome.QUALITY, f"{QUALITY}: {check.reason}", check.deviation)
    return Verdict("ok", accepted, "", check.deviation)
