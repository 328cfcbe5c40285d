"""What a trial may cost and what is held back: the study's budget as the tuner spends it.

`Budget` (`torchdoctor.tune.budget`) keeps the clock, the deadline and the reserve's place in
every request's timeout; the prices of a trial's parts are `torchdoctor.tune.cost`'s. Here they
meet: the next trial's estimate from the costs measured so far (the opens of the arms this
tuner started, the baseline's and the best's records), whether a trial may start, and the final
A/B's reserve, held after a keep while it fits and dropped with a note once it no longer does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torchdoctor.core.errors import TuneError
from torchdoctor.measure import MIN_REPLICATES
from torchdoctor.tune.budget import BUDGET_GRACE_S, Budget, BudgetExhausted
from torchdoctor.tune.cost import TrialCosts, measured_costs
from torchdoctor.tune.outcome import Outcome, Verdict
from torchdoctor.tune.whole_runs import TURN_PAIRS

if TYPE_CHECKING:
    from torchdoctor.tune.arms import MeasurePlan
    from torchdoctor.tune.records import TrialFigures, TrialResult


class Allowance:
    """A study's budget as its trials spend it: `budget`, the opens and closes measured so far
    (`opens_s`, `closes_s`), and whether the final A/B is wanted and still fits
    (`confirm_dropped`)."""

    def __init__(self, budget: Budget, plan: MeasurePlan) -> None:
        self.budget = budget
        self.plan = plan
        #: Seconds each arm this tuner opened took to start and warm up (`tune.cost`).
        self.opens_s: list[float] = []
        #: ... and to close (its process's exit, reaped).
        self.closes_s: list[float] = []
        #: Whether the study ends with the final A/B (`plan_confirmation`), and why it was
        #: dropped when its reserve no longer fit after a keep (`hold_reserve`).
        self.confirm_wanted = False
        self.confirm_dropped: str | None = None

    def trial_costs(
        self, baseline: TrialResult | None, best_trial: TrialResult | None
    ) -> TrialCosts | None:
        """What a trial's parts cost here as measured so far (None before the baseline)."""
        if baseline is None:
            return None
        return measured_costs(baseline, best_trial, self.opens_s, self.plan, self.closes_s)

    def estimated_trial_s(
        self, baseline: TrialResult | None, best_trial: TrialResult | None, *, in_turns: bool
    ) -> float:
        """The next ladder trial by its parts (`tune.cost`): a fresh candidate's open and an
        A/B to its first look, at the costs measured here. Not the trials so far: a win's
        second pair of processes or a trial the deadline cut would make every later trial
        look as long as they were."""
        costs = self.trial_costs(baseline, best_trial)
        if costs is None:
            return 0.0
        if in_turns:  # that many pairs of whole runs, each a process measured alone
            return 2 * TURN_PAIRS * costs.whole_run_s(self.plan)
        return costs.ladder_trial_s(self.plan)

    def plan_confirmation(self, wanted: bool) -> None:
        """Whether the study ends with the final A/B. Its reserve is held only once a change
        is kept (`hold_reserve`): while the best is the baseline there is nothing to confirm."""
        self.confirm_wanted = wanted
        self.budget.confirm_planned = False

    def hold_reserve(self, change: dict[str, Any], cost_s: float) -> None:
        """After a keep: hold the final A/B's reserve (`cost_s`) while it fits in what is left;
        once it no longer does, the confirmation is dropped (`confirm_dropped`, which the
        result's notes say) and the ladder has the rest, rather than stopping with a reserve
        it can never spend."""
        if not self.confirm_wanted or self.confirm_dropped is not None:
            return
        left = self.budget.remaining_s()
        if left >= cost_s + BUDGET_GRACE_S:
            self.budget.confirm_planned = True
            return
        self.budget.confirm_planned = False
        shown = " ".join(f"{k}={v}" for k, v in change.items())
        self.confirm_dropped = (
            f"after the keep of {shown} the final A/B's {MIN_REPLICATES} fresh process pairs "
            f"(about {cost_s:.0f} s) no longer fit in the {max(left, 0.0):.0f} s left, so the "
            "ladder went on without it; re-run with a larger --budget for the end-to-end figure"
        )

    def check_fits(self, estimate_s: float, reserve_s: float) -> None:
        """A trial is refused (`BudgetExhausted`) when the budget left is under its estimate
        and `reserve_s`."""
        if self.budget.remaining_s() < estimate_s + reserve_s:
            raise BudgetExhausted

    def timed(
        self,
        change: dict[str, Any],
        measure: Callable[[], tuple[Verdict, TrialFigures]],
        *,
        estimate_s: float,
        reserve_s: float,
        on_begin: Callable[[dict[str, Any]], None] | None,
    ) -> tuple[Verdict, TrialFigures, float]:
        """One trial of `change` measured inside the budget: its verdict, figures and wall
        time. Refused (`check_fits`) when the budget left is under the trial's estimate and
        `reserve_s`; announced (`on_begin`) only once it runs. A trial the deadline cut is a
        property of the budget, not of the recipe: it is not stored either (`BudgetExhausted`
        naming it), so a resumed study with more budget runs it again."""
        budget = self.budget
        self.check_fits(estimate_s, reserve_s)
        if on_begin is not None:
            on_begin(change)
        start = budget.clock()
        verdict, figures = measure()
        if verdict.outcome is Outcome.TIMEOUT and budget.past_deadline():
            raise BudgetExhausted(cut=change, cut_after_s=budget.clock() - start)
        return verdict, figures, budget.clock() - start

    def too_small(self) -> TuneError:
        """The budget ran out before the baseline was measured."""
        return TuneError(
            f"the budget of {self.budget.budget_s:g} s is too small to measure even the "
            f"baseline (it took more than {self.budget.elapsed_s():.1f} s)",
            hint="give a larger --budget (e.g. 10m)",
        )
