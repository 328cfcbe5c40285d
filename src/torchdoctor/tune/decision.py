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

A study judges against one quality reference, its baseline's (`Judge.reference`), and holds a
candidate to the loosest safety class of everything it differs from the baseline by
(`Judge.held_to`): a ladder's trials, the memory ladder's (`tune.fit`) and the joint search's
(`tune.joint`) alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchdoctor.core.errors import TuneError
from torchdoctor.core.vocabulary import Safety
from torchdoctor.measure import PairedSpeedup, speed_verdict
from torchdoctor.tune.outcome import QUALITY, Outcome, Verdict
from torchdoctor.tune.parity import (
    ParityResult,
    QualityReference,
    check_parity,
    first_non_finite,
    loosest,
)

if TYPE_CHECKING:
    from torchdoctor.tune.records import TrialResult

__all__ = ["Judge", "SpeedCheck", "Verdict", "judge"]


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


class Judge:
    """A study's verdicts: against its baseline's quality reference, at its tolerances, each
    candidate held to the loosest safety class of the kept changes and its own."""

    def __init__(self, tolerances: dict[Safety, float], parity_steps: int) -> None:
        self.tolerances = tolerances
        self.parity_steps = parity_steps
        #: The study's baseline, once measured or replayed (`Tuner.run_baseline`).
        self.baseline: TrialResult | None = None
        #: Safety classes of the kept changes: a candidate's loss is compared with the fp32
        #: eager baseline, so its tolerance is the loosest class of everything it differs by
        #: (threads=1 on top of a kept compile is not held to "exact" against eager).
        self.kept_safety: list[Safety] = []

    def held_to(self, safety: Safety) -> Safety:
        """The class a candidate of a change of `safety` is held to, the kept changes' with."""
        return loosest([*self.kept_safety, safety])

    def reference(self) -> QualityReference:
        """The baseline's late-window losses and their spread under no-op perturbations."""
        baseline = self.baseline
        if baseline is None:
            raise TuneError("internal: a quality check before the baseline")
        return QualityReference.from_trajectories(
            baseline.losses, baseline.reference_losses, steps=self.parity_steps
        )

    def verdict(
        self,
        losses: Sequence[float | None],
        safety: Safety,
        *,
        speed: SpeedCheck | None,
        accepted: Outcome,
    ) -> Verdict:
        """`judge` against the baseline's quality reference."""
        return judge(
            losses,
            speed=speed,
            parity=lambda losses: check_parity(
                self.reference(), losses, safety, tolerances=self.tolerances
            ),
            accepted=accepted,
        )
