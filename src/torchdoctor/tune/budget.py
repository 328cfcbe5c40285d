"""The tuner's budget: one deadline for a whole study, a reserve for the final A/B.

Every worker request of a trial shares one deadline (see `torchdoctor.tune.arms.Timeout`): the
budget, less the reserve held for the final confirmation while the ladder runs. The reserve is
held only once a change is kept, and only while it fits (`Allowance.hold_reserve`): while the best
is the baseline no final A/B will run, and a reserve larger than what is left would stop the
ladder for a confirmation that cannot run either. Trials read back from a stored study count
with the wall time they took when they ran.

What the final confirmation is expected to cost is priced from its parts as measured here
(`torchdoctor.tune.cost`: `confirm_cost_s`, `pair_cost_s`), and both the tuner (which holds
the reserve) and the confirmation (which spends it, `torchdoctor.tune.confirm`) read it there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from torchdoctor.core.vocabulary import Clock

#: Longest any single worker request may take (a torch.compile of a large model included).
DEFAULT_TRIAL_TIMEOUT_S: Final = 600.0

#: A request may run this far past its deadline before it is cut (so a trial's last chunk is
#: not discarded a second before its end). Every request of a trial shares one deadline (see
#: `torchdoctor.tune.arms.Timeout`): the budget, less the reserve for the final A/B.
BUDGET_GRACE_S: Final = 5.0


class BudgetExhausted(Exception):
    """Not enough budget left for another trial; the tuner stops and reports what it has.

    `cut` names the change whose trial the deadline cut before its A/B decided, and
    `cut_after_s` how long that trial ran (None when the budget ran out between trials).
    """

    def __init__(self, cut: dict[str, object] | None = None, cut_after_s: float = 0.0) -> None:
        super().__init__()
        self.cut = cut
        self.cut_after_s = cut_after_s


class Budget:
    """Seconds spent and left of a study's budget, and the timeout of the next request."""

    def __init__(
        self,
        budget_s: float,
        *,
        trial_timeout_s: float,
        clock: Clock,
        confirm_cost_s: Callable[[], float],
    ) -> None:
        self.budget_s = budget_s
        self.trial_timeout_s = trial_timeout_s
        self.clock = clock
        self.started = clock()
        #: Wall time of the trials read back from the study instead of being run again.
        self.reused_wall_s = 0.0
        #: Whether budget is held back from ladder trials for the final confirmation A/B.
        self.confirm_planned = False
        self._confirm_cost_s = confirm_cost_s

    def elapsed_s(self) -> float:
        return self.clock() - self.started + self.reused_wall_s

    def remaining_s(self) -> float:
        return self.budget_s - self.elapsed_s()

    def reserve_s(self) -> float:
        """Budget held back from ladder trials for the final A/B (0 once it runs).

        The ladder's own grace period comes out of its side: a ladder trial cut at its
        deadline leaves the whole confirmation cost, which may itself run into the grace.
        """
        return self._confirm_cost_s() + BUDGET_GRACE_S if self.confirm_planned else 0.0

    def request_timeout(self) -> float:
        """Seconds the next worker request may take: to the shared deadline, plus grace."""
        left = self.remaining_s() - self.reserve_s() + BUDGET_GRACE_S
        return max(min(self.trial_timeout_s, left), 1.0)

    def past_deadline(self) -> bool:
        return self.remaining_s() - self.reserve_s() <= 0
