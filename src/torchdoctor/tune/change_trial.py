"""A change's trial: the candidate recipe against the current best, measured and judged.

Where two processes fit, the candidate's arm runs beside the best's live one in alternating
chunks until the sequential A/B is clear (`arms.interleave_until_clear`), after the early exits
that spare it (`tune.early`: a knob that did not act, a candidate far slower from its warm-up);
a proven win is then judged for quality and, unless the spread between processes spares it,
proven again on a second pair of fresh processes (`tune.replicates`). Where they do not fit,
whole runs take turns on the GPU (`tune.whole_runs`), and a candidate out of memory beside the
parked best sends the study into turns and is measured so.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any, Protocol

from torchdoctor.core.vocabulary import Safety
from torchdoctor.measure import PairedSpeedup
from torchdoctor.procs import WorkerFailure
from torchdoctor.tune.arms import (
    Arm,
    OnLook,
    interleave_until_clear,
    measure_alone,
)
from torchdoctor.tune.decision import SpeedCheck
from torchdoctor.tune.early import does_not_apply, futile, futile_score
from torchdoctor.tune.live_arms import LiveArms, switched
from torchdoctor.tune.outcome import Outcome, Verdict
from torchdoctor.tune.records import TrialFigures
from torchdoctor.tune.replicates import Replicates
from torchdoctor.tune.settings import TuneSettings
from torchdoctor.tune.whole_runs import TURN_PAIRS, run_in_turns


class Judging(Protocol):
    """A verdict on a candidate's losses and speed (`Judge.verdict`)."""

    def __call__(
        self,
        losses: list[float | None],
        safety: Safety,
        *,
        speed: SpeedCheck | None,
        accepted: Outcome,
    ) -> Verdict: ...


class ChangeTrial:
    """Measures a change's candidate against the best with the study's arms (`live`)."""

    def __init__(
        self,
        live: LiveArms,
        replicates: Replicates,
        judge: Judging,
        settings: TuneSettings,
    ) -> None:
        self.live = live
        self.replicates = replicates
        self.judge = judge
        self.plan = settings.plan
        self.min_gain = settings.min_gain
        self.replicate_wins = settings.replicate_wins
        self.timeout = live.allowance.budget.request_timeout

    def measure(
        self,
        best_recipe: dict[str, Any],
        recipe: dict[str, Any],
        safety: Safety,
        *,
        best_rate: float,
        changed: tuple[str, ...] = (),
        on_look: OnLook | None = None,
    ) -> tuple[Verdict, TrialFigures, Arm | None]:
        """The trial of `recipe` against the best (`best_recipe`, which the ladder measured at
        `best_rate`): its verdict, its figures and the arm it ends with (the next best when
        kept)."""
        if self.live.in_turns:
            return self._in_turns(best_recipe, recipe, safety, changed=changed)
        plan = self.plan
        speed: SpeedCheck | None = None
        cand: Arm | None = None
        # the best arm's switching cost so far (it lives across trials): this trial's is after
        switched_before = self.live.best.switch_s if self.live.best is not None else 0.0
        try:
            if self.live.best is None:
                self.live.best = self.live.open(best_recipe, "best")
            limit = futile_score(self.live.best, best_rate)
            cand = self.live.open(recipe, "candidate", give_up_above=limit, changed=changed)
            inapplicable = does_not_apply(cand, recipe, changed)
            if inapplicable is not None:
                return inapplicable, TrialFigures(), cand
            hopeless = futile(cand, limit, best_rate)
            if hopeless is not None:
                return (*hopeless, cand)
            est = interleave_until_clear(
                self.live.best,
                cand,
                plan,
                threshold=1.0 + self.min_gain,
                timeout=self.timeout,
                on_look=on_look,
            )
            speed = SpeedCheck(est, 1.0 + self.min_gain)
            if speed.faster:
                # Only a proven speed win needs the full parity trajectory: a change already
                # rejected for speed is not run further (fp16 on a CPU is ~100x slower, and
                # 32 parity steps of it cost minutes of budget).
                cand.fill_losses(plan.parity_steps, timeout=self.timeout)
        except WorkerFailure as exc:
            reason = exc.reason
            beside = self.live.source.turns.beside_pinned(cand)
            if exc.kind == "oom" and beside is not None:
                reason = f"{reason} (another arm stayed on the GPU beside it: {beside})"
            if cand is not None:
                # The failure came while both arms ran and either may have died: start the
                # best afresh for the next trial rather than guess.
                cand.close()
            self.live.close()
            if exc.kind == "oom" and beside is None and self.live.may_take_turns():
                # Out of memory beside the parked best: the recipe may fit alone. The study
                # goes into turns and the trial is measured so.
                self.live.into_turns(
                    f"a candidate ran out of memory beside the parked best ({reason})"
                )
                return self._in_turns(best_recipe, recipe, safety, changed=changed)
            return Verdict.failure(exc.kind, reason), TrialFigures(), None
        best = self.live.best
        losses = list(cand.losses[: plan.parity_steps])
        verdict = self.judge(losses, safety, speed=speed, accepted=Outcome.KEPT)
        again: PairedSpeedup | None = None
        ends_with: Arm | None = cand
        if verdict.outcome is Outcome.KEPT and self.replicate_wins:
            spared = self.replicates.spared(est.ci_low)
            if spared is not None:
                verdict = replace(verdict, reason=spared)
            else:
                verdict, again, ends_with = self._replicate(
                    best_recipe, recipe, cand, first=est, kept=verdict
                )
        figures = replace(
            cand.figures(losses),
            samples_per_s=cand.rate(),
            best_samples_per_s=best.rate(),
            step_time_s=statistics.median(cand.chunk_scores) * cand.per_step(),
            speedup_vs_best=est.speedup,
            speedup_vs_best_ci=(est.ci_low, est.ci_high),
            replicate_speedup_vs_best=again.speedup if again is not None else None,
            replicate_speedup_vs_best_ci=(again.ci_low, again.ci_high)
            if again is not None
            else None,
            best_chunk_times_s=list(best.chunk_scores),
            machine_load=est.load,
            remeasured=est.remeasured,
            device_switch_s=switched(best.switch_s - switched_before + cand.switch_s),
            sharing_mode=self.live.sharing.mode if self.live.sharing is not None else None,
        )
        return verdict, figures, ends_with

    def _in_turns(
        self,
        best_recipe: dict[str, Any],
        recipe: dict[str, Any],
        safety: Safety,
        *,
        changed: tuple[str, ...] = (),
    ) -> tuple[Verdict, TrialFigures, Arm | None]:
        """A trial's verdict and figures from whole runs in turns (tune/whole_runs.py): one
        process on the GPU at a time, the interval from pairs of adjacent runs. The trial
        ends with no arm live (the next trial starts its own)."""
        plan, timeout = self.plan, self.timeout
        self.live.close()
        recipes = {"best": best_recipe, "candidate": recipe}

        def open_side(side: str) -> Arm:
            mine = changed if side == "candidate" else ()
            return self.live.open(recipes[side], f"{side}-alone", changed=mine)

        def time_run(arm: Arm) -> float:
            measure_alone(arm, plan, timeout=timeout)
            return statistics.median(arm.chunk_scores)

        try:
            runs = run_in_turns(
                open_side,
                time_run,
                pairs=TURN_PAIRS,
                stop=lambda arm: does_not_apply(arm, recipe, changed),
                losses=lambda arm: arm.fill_losses(plan.parity_steps, timeout=timeout),
            )
        except WorkerFailure as exc:
            return Verdict.failure(exc.kind, exc.reason), TrialFigures(), None
        if runs.stopped is not None:
            return runs.stopped, TrialFigures(), None
        est = runs.estimate(confidence=plan.confidence)
        speed = SpeedCheck(est, 1.0 + self.min_gain)
        losses = runs.losses[: plan.parity_steps]
        verdict = self.judge(losses, safety, speed=speed, accepted=Outcome.KEPT)
        figures = TrialFigures(
            samples_per_s=runs.rate("candidate"),
            best_samples_per_s=runs.rate("best"),
            step_time_s=statistics.median(runs.step_s["candidate"]),
            speedup_vs_best=est.speedup,
            speedup_vs_best_ci=(est.ci_low, est.ci_high),
            peak_memory_bytes=runs.peaks["candidate"],
            losses=losses,
            compile_s=runs.compile_s,
            warmup_s=runs.warmup_s,
            chunk_times_s=list(runs.scores["candidate"]),
            best_chunk_times_s=list(runs.scores["best"]),
            sharing_mode="turns",
        )
        return verdict, figures, None

    def _replicate(
        self,
        best_recipe: dict[str, Any],
        recipe: dict[str, Any],
        cand: Arm,
        *,
        first: PairedSpeedup,
        kept: Verdict,
    ) -> tuple[Verdict, PairedSpeedup | None, Arm | None]:
        """`Replicates.second_pair` on a kept win, with the first pair's arms ended at once
        (nothing of them is needed) and the fresh best live when the win did not hold."""
        first_rates = (self.live.best.rate() if self.live.best is not None else None, cand.rate())
        cand.close(at_once=True)
        self.live.close(at_once=True)
        verdict, again, ends_with, fresh_best = self.replicates.second_pair(
            best_recipe, recipe, first_rates, first=first, kept=kept
        )
        if fresh_best is not None:
            self.live.best = fresh_best
        return verdict, again, ends_with
