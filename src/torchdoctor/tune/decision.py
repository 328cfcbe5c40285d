"""The one decision on a measured candidate: does it train, is it faster, does it learn alike?

Used by every trial that measures a recipe: a ladder step (speed proven by the sequential A/B
against the current best, `torchdoctor.measure.SequentialTest`) and a joint-search trial
(measured alone, so with no speed verdict). In order:

1. a NaN/inf loss fails the trial (status "nan");
2. a speed verdict other than "faster" rejects it (not a proven win);
3. a loss trajectory outside the baseline's own spread rejects it (`tune.parity`);
4. otherwise it is accepted ("kept" on the ladder, "measured" in the joint search).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from torchdoctor.measure import PairedSpeedup, speed_verdict
from torchdoctor.tune.parity import ParityResult, first_non_finite
from torchdoctor.tune.records import Decision, TrialStatus


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


@dataclass(frozen=True)
class Verdict:
    status: TrialStatus
    decision: Decision
    reason: str = ""
    loss_deviation: float | None = None

    def fields(self) -> dict[str, object]:
        """The verdict as fields of a `TrialResult`."""
        return asdict(self)


def judge(
    losses: Sequence[float | None],
    *,
    speed: SpeedCheck | None,
    parity: Callable[[Sequence[float | None]], ParityResult],
    accepted: Decision,
) -> Verdict:
    """The verdict on a candidate (see the module docstring); `parity` runs only if needed."""
    bad = first_non_finite(losses)
    if bad is not None:
        return Verdict("nan", "failed", f"loss is NaN/inf at step {bad}")
    if speed is not None and not speed.faster:
        return Verdict("ok", "rejected", speed.reason())
    check = parity(losses)
    if not check.passed:
        return Verdict("ok", "rejected", "quality: " + check.reason, check.deviation)
    return Verdict("ok", accepted, "", check.deviation)
