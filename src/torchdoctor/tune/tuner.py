"""The tuner: the ladder's state, and the one door every trial goes through.

A `Tuner` holds what the study has found so far (the best recipe, the baseline, the kept rungs
and the rejections) and runs each trial the ladders ask for (`run_baseline`, `try_change`; the
memory ladder's through `timed_trial`, the final A/B's and the joint search's directly)
through `run_or_replay`, the one place a trial is either read back from the study (a resumed
run, or another tuner sharing the study) or run, and then applied to that state the same way
for both (`apply_result`). What became of a trial is its `Outcome` (`tune.outcome`), which the
ladder decides by.

Each job of a trial has its own home:

- the budget, what a trial may cost and what is held back for the final A/B:
  `tune.allowance` (`Allowance`), over `tune.budget`'s deadline and `tune.cost`'s prices;
- applying a recipe, the arms opened and the best's kept live, how they share a GPU:
  `tune.live_arms` (`LiveArms`), over `tune.sources`;
- the baseline's trial and the quality check's yardstick: `tune.baseline`;
- a change's A/B against the best, interleaved or in turns: `tune.change_trial`;
- replicates, a win's second pair of fresh processes and the baseline's twin:
  `tune.replicates`;
- judging, the verdict and the quality check: `tune.decision` (`Judge`), `tune.parity`;
- the final A/B against the baseline: `tune.confirm`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

# `tune --min-gain`'s default (core/defaults.py, with why).
from torchdoctor.core.defaults import DEFAULT_MIN_GAIN as DEFAULT_MIN_GAIN
from torchdoctor.core.errors import TuneError
from torchdoctor.core.vocabulary import Clock, Safety
from torchdoctor.measure import PairedSpeedup
from torchdoctor.procs import SessionSpec
from torchdoctor.tune.allowance import Allowance
from torchdoctor.tune.arms import Arm
from torchdoctor.tune.baseline import BaselineTrial, replayed_own_settings
from torchdoctor.tune.budget import Budget, BudgetExhausted
from torchdoctor.tune.change_trial import ChangeTrial
from torchdoctor.tune.claims import WaitExpired
from torchdoctor.tune.cost import TrialCosts, confirm_cost_s
from torchdoctor.tune.decision import Judge
from torchdoctor.tune.live_arms import LiveArms, workload_arms
from torchdoctor.tune.outcome import Outcome, Verdict
from torchdoctor.tune.records import (
    Confirmation,
    Rejection,
    Rung,
    Trial,
    TrialFigures,
    TrialKind,
    TrialResult,
    recipe_key,
)
from torchdoctor.tune.replicates import Replicates
from torchdoctor.tune.settings import TuneSettings
from torchdoctor.tune.sources import ArmSource
from torchdoctor.tune.study import Study
from torchdoctor.tune.turns import DeviceSharing

__all__ = ["BudgetExhausted", "TuneSettings", "Tuner", "recipe_key"]

T = TypeVar("T", TrialResult, Confirmation)


class Tuner:
    def __init__(
        self,
        base_spec: SessionSpec,
        settings: TuneSettings,
        study: Study,
        *,
        log_dir: Path | None = None,
        on_trial: Callable[[Trial], None] | None = None,
        clock: Clock = time.monotonic,
        arms: ArmSource | None = None,
    ) -> None:
        self.base_spec = base_spec
        self.settings = settings
        #: where arms come from (tune/sources.py): the spec's workload unless given
        self.arms: ArmSource = arms or workload_arms(
            base_spec,
            settings.plan,
            settings.objective,
            isolate=settings.isolate,
            memory_cap_bytes=settings.memory_cap_bytes,
            log_dir=log_dir,
        )
        self.study = study
        self.log_dir = log_dir
        self.on_trial = on_trial
        #: The study's budget as its trials spend it (tune/allowance.py).
        self.allowance = Allowance(
            Budget(
                settings.budget_s,
                trial_timeout_s=settings.trial_timeout_s,
                clock=clock,
                confirm_cost_s=self.confirm_cost_s,
            ),
            settings.plan,
        )
        self.stored = study.completed()
        self.trials: list[Trial] = []
        self.reused = 0
        self.best_recipe: dict[str, Any] = dict(base_spec.recipe)
        self.baseline: TrialResult | None = None
        self.rungs: list[Rung] = []
        self.rejected: list[Rejection] = []
        #: The trial that made the current best (None while the best is the baseline).
        self.best_trial: TrialResult | None = None
        #: knob -> the value the baseline runs with of its own (a script's DataLoader
        #: settings, `Arm.own_settings`): the ladder's "current value" where the recipe is silent
        self.own_settings: dict[str, Any] = {}
        #: Called with a change as its trial starts to run (not when replayed): what a live
        #: terminal shows as the current trial. Set by whoever watches (tune's `on_start`).
        self.on_begin: Callable[[dict[str, Any]], None] | None = None
        #: Called at each look of a trial's A/B with the estimate so far and the rounds.
        self.on_look: Callable[[PairedSpeedup, int], None] | None = None
        #: The ladder's planned order of knobs (set by `tune.api` before `on_start`).
        self.planned_order: list[str] = []
        #: The arms opened, the best's kept live, how they share a GPU (tune/live_arms.py)
        self.live = LiveArms(
            self.arms,
            self.allowance,
            study,
            log_dir=log_dir,
            step=lambda: len(self.trials),
            forced=settings.device_sharing,
        )
        #: How much processes of one recipe differ; a win's second pair (tune/replicates.py)
        self.replicates = Replicates(
            settings.plan,
            open_arm=self.live.open,
            timeout=self.budget.request_timeout,
            past_deadline=self.budget.past_deadline,
        )
        #: Verdicts against the baseline's quality reference (tune/decision.py)
        self.judging = Judge(settings.tolerances, settings.plan.parity_steps)
        #: A change's A/B against the best (tune/change_trial.py)
        self.change_trial = ChangeTrial(self.live, self.replicates, self.judging.verdict, settings)

    @property
    def sharing(self) -> DeviceSharing | None:
        """How the arms share the GPU (`LiveArms.sharing`); None on a CPU."""
        return self.live.sharing

    @property
    def in_turns(self) -> bool:
        """Whether arms run one process on the GPU at a time (tune/whole_runs.py)."""
        return self.live.in_turns

    # budget (tune/allowance.py)

    @property
    def budget(self) -> Budget:
        return self.allowance.budget

    @property
    def confirm_dropped(self) -> str | None:
        """Why the final A/B was dropped after a keep (None while it is not)."""
        return self.allowance.confirm_dropped

    def confirm_cost_s(self) -> float:
        return confirm_cost_s(self.baseline, self.best_trial, self.trial_costs())

    def trial_costs(self) -> TrialCosts | None:
        """What a trial's parts cost here as measured so far (None before the baseline)."""
        return self.allowance.trial_costs(self.baseline, self.best_trial)

    def estimated_trial_s(self) -> float:
        """The next ladder trial by its parts (`Allowance.estimated_trial_s`)."""
        return self.allowance.estimated_trial_s(
            self.baseline, self.best_trial, in_turns=self.in_turns
        )

    def plan_confirmation(self, wanted: bool) -> None:
        """Whether the study ends with the final A/B (`Allowance.plan_confirmation`)."""
        self.allowance.plan_confirmation(wanted)

    # arms (tune/live_arms.py)

    def close(self, *, at_once: bool = False) -> None:
        """End the best recipe's live arm, if one is."""
        self.live.close(at_once=at_once)

    # recording

    def record(self, result: T, *, reused: bool, store: bool = True, waited_s: float = 0.0) -> T:
        """`waited_s`: how long this tuner waited for another to run the reused trial (a
        shared study), which its clock has already counted against the budget."""
        if reused:
            self.reused += 1
            self.budget.reused_wall_s += max(0.0, result.wall_s - waited_s)
        elif store:
            self.study.add(result)
        self.trials.append(result)
        if self.on_trial is not None:
            self.on_trial(result)
        return result

    def run_or_replay(
        self,
        key: str,
        record_type: type[T],
        run: Callable[[], T] | None,
        *,
        apply: Callable[[T, bool], None] | None = None,
        store: bool = True,
    ) -> T:
        """The trial with `key`: read back from the study when it holds one of `record_type`
        (a resumed run, or another worker sharing the study), else `run()` (may raise
        `BudgetExhausted`); then `apply(result, reused)` updates the tuner's state from it,
        the same way for both, and it is recorded (stored in the study unless reused or
        `store` is False).

        `run` None replays a trial known to be stored (the joint search's, whose keys it
        lists); a key the study lacks is then an internal error.
        """
        stored = self.stored.get(key)
        waited_s = 0.0
        if not isinstance(stored, record_type) and run is not None and store:
            # A shared study: another tuner's record of this step, once it has one; else
            # the step is now this tuner's (tune/claims.py).
            began = self.budget.clock()
            try:
                stored = self.study.claim(key, expired=lambda: self.budget.remaining_s() <= 0)
            except WaitExpired:
                raise BudgetExhausted from None
            waited_s = self.budget.clock() - began
        reused = isinstance(stored, record_type)
        if isinstance(stored, record_type):
            result = stored
        elif run is not None:
            try:
                result = run()
            except BaseException:
                self.study.release(key)  # no record: another tuner may run it
                raise
        else:
            raise TuneError(f"internal: no stored trial {key!r} to replay")
        if apply is not None:
            apply(result, reused)
        return self.record(result, reused=reused, store=store, waited_s=waited_s)

    # the baseline

    def run_baseline(self) -> TrialResult:
        def apply(result: TrialResult, reused: bool) -> None:
            if reused:  # a resumed study reuses the baseline without its arm
                self.own_settings = replayed_own_settings(self.study)
                self.live.restore_sharing()
            self.baseline = self.judging.baseline = result
            self.rungs.append(Rung.baseline(result))

        def run() -> TrialResult:
            baseline = BaselineTrial(
                self.live, self.allowance, self.replicates, self.study, self.settings
            )
            try:
                return baseline.measure(key, self.best_recipe)
            finally:
                self.own_settings = baseline.own_settings

        key = "baseline:" + recipe_key(self.best_recipe)
        try:
            return self.run_or_replay(key, TrialResult, run, apply=apply)
        except BudgetExhausted:  # spent waiting for another tuner of a shared study
            raise self.allowance.too_small() from None

    # one change

    def try_change(self, change: dict[str, Any], *, kind: TrialKind, safety: Safety) -> TrialResult:
        """`change` on top of the current best, measured against it (`ChangeTrial`) or read
        back; the ladder's state updated from it (`apply_result`) and the arm it ended with
        handed on (`LiveArms.hand_off`)."""
        if self.baseline is None:
            raise TuneError("internal: try_change before the baseline")
        candidate = {**self.best_recipe, **change}
        key = f"{kind}:{recipe_key(self.best_recipe)}->{recipe_key(candidate)}"
        ended: list[Arm | None] = [None]  # the arm the candidate's trial ends with

        def measure() -> tuple[Verdict, TrialFigures]:
            verdict, figures, ended[0] = self.change_trial.measure(
                self.best_recipe,
                candidate,
                self.judging.held_to(safety),
                best_rate=self.rungs[-1].samples_per_s,
                changed=tuple(change),
                on_look=self.on_look,
            )
            if figures.best_samples_per_s is None:
                figures = replace(figures, best_samples_per_s=self.rungs[-1].samples_per_s)
            return verdict, figures

        def run() -> TrialResult:
            result = self.timed_trial(
                key, kind, change, candidate, measure, reserve_s=self.budget.reserve_s()
            )
            self.live.hand_off(ended[0], kept=result.outcome is Outcome.KEPT)
            return result

        return self.run_or_replay(
            key, TrialResult, run, apply=lambda result, _: self.apply_result(result, change, safety)
        )

    def timed_trial(
        self,
        key: str,
        kind: TrialKind,
        change: dict[str, Any],
        candidate: dict[str, Any],
        measure: Callable[[], tuple[Verdict, TrialFigures]],
        *,
        reserve_s: float = 0.0,
    ) -> TrialResult:
        """One trial of `change` measured inside the budget (`Allowance.timed`), as its record
        (the speed ladder's and the memory ladder's alike)."""
        verdict, figures, wall_s = self.allowance.timed(
            change,
            measure,
            estimate_s=self.estimated_trial_s(),
            reserve_s=reserve_s,
            on_begin=self.on_begin,
        )
        return TrialResult.of(
            key=key,
            kind=kind,
            step=len(self.trials),
            change=change,
            recipe=candidate,
            verdict=verdict,
            figures=figures,
            wall_s=wall_s,
        )

    def apply_result(self, result: TrialResult, change: dict[str, Any], safety: Safety) -> None:
        """Update the ladder from a (new or replayed) trial result (the speed ladder's trials
        and the memory ladder's, `tune.fit`)."""
        if result.outcome is not Outcome.KEPT:
            self.rejected.append(Rejection.of(self.rungs[-1], result, change))
            return
        if self.live.best is not None and self.live.best.recipe != result.recipe:
            self.close()  # a replayed keep: the live best arm is stale
        self.best_recipe = dict(result.recipe)
        self.best_trial = result
        self.judging.kept_safety.append(safety)
        self.rungs.append(Rung.kept(self.rungs[-1], result, change))
        self.allowance.hold_reserve(change, self.confirm_cost_s())
