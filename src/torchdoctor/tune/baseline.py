"""The baseline's trial: its recipe measured alone, and the quality check's yardstick.

Every later trial is judged against the baseline: its rate and step (the ladder's first rung,
and what later trials and the final A/B are sized by), its losses and the reference runs that
give their spread under no-op perturbations (`tune.parity`, paid once per study). On a GPU its
first park decides how the arms share the device (`LiveArms.share_device`), and, where they
interleave, a twin of it first measures how much processes of one recipe differ
(`Replicates.measure_twin`). The baseline must run: a failure here ends the study with what to
change.
"""

from __future__ import annotations

import statistics
from typing import Any, Final

from torchdoctor.core.errors import TuneError
from torchdoctor.procs import WorkerFailure
from torchdoctor.tune.allowance import Allowance
from torchdoctor.tune.arms import Arm, measure_alone
from torchdoctor.tune.live_arms import LiveArms, switched
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.parity import first_non_finite
from torchdoctor.tune.records import TrialResult
from torchdoctor.tune.replicates import Replicates
from torchdoctor.tune.settings import TuneSettings
from torchdoctor.tune.study import Study

#: Study attribute holding the baseline's own settings (`Tuner.own_settings`).
OWN_SETTINGS_ATTR: Final = "own_settings"


def replayed_own_settings(study: Study) -> dict[str, Any]:
    """The baseline's own settings as its run stored them (a resumed study reuses the baseline
    without its arm)."""
    return dict(study.attr(OWN_SETTINGS_ATTR) or {})


class BaselineTrial:
    """Measures the baseline of a study whose arms are `live`, inside `allowance`."""

    def __init__(
        self,
        live: LiveArms,
        allowance: Allowance,
        replicates: Replicates,
        study: Study,
        settings: TuneSettings,
    ) -> None:
        self.live = live
        self.allowance = allowance
        self.replicates = replicates
        self.study = study
        self.plan = settings.plan
        self.reference_runs = settings.reference_runs
        self.log_dir = live.log_dir
        #: knob -> the value the baseline ran with of its own (`Arm.own_settings`), once it ran
        self.own_settings: dict[str, Any] = {}

    def measure(self, key: str, recipe: dict[str, Any]) -> TrialResult:
        """The baseline's record; its arm is left live as the best (none in turns)."""
        budget = self.allowance.budget
        start = budget.clock()
        plan = self.plan
        try:
            arm = self.live.open(recipe, "baseline")
            self.own_settings = dict(arm.own_settings)
            if self.own_settings:  # a resumed study reuses the baseline without its arm
                self.study.set_attr(OWN_SETTINGS_ATTR, self.own_settings)
            measure_alone(arm, plan, timeout=budget.request_timeout)
            arm.fill_losses(plan.parity_steps, timeout=budget.request_timeout)
            measured_s = budget.clock() - start
            self.live.share_device(arm)
            if arm.timer == "cuda_event" and not self.live.in_turns:
                # In turns every pair is fresh processes already: no twin to measure.
                self.replicates.measure_twin(arm, recipe)
        except WorkerFailure as exc:
            if exc.kind == "timeout" and budget.remaining_s() <= 0:
                raise self.allowance.too_small() from None
            hint = "check that it runs on its own (`torchdoctor run`; a script: plain python)"
            if exc.kind == "oom":
                # Every trial is judged against the baseline's losses, so it must run: start
                # from the same effective batch in micro-batches (`--objective fit` lowers
                # memory from there).
                hint = (
                    "start from a recipe that runs: the same effective batch in smaller "
                    "micro-batches (--set batch_size=B/k --set grad_accum=k)"
                )
            raise TuneError(
                f"the baseline recipe failed ({exc.kind}): {exc.reason}", hint=hint
            ) from None
        # The quality check's yardstick, paid once per study (see tune.parity).
        references = self._references(arm, recipe)
        bad = first_non_finite(arm.losses)
        if bad is not None or budget.remaining_s() <= 0:
            arm.close()
            if bad is None:
                raise self.allowance.too_small()
            raise TuneError(f"the baseline's loss is not finite at step {bad}")
        sharing = self.live.sharing
        result = TrialResult(
            key=key,
            kind="baseline",
            step=0,
            recipe=dict(recipe),
            status="ok",
            decision="baseline",
            outcome=Outcome.BASELINE,
            samples_per_s=arm.rate(),
            step_time_s=statistics.median(arm.chunk_scores) * arm.per_step(),
            peak_memory_bytes=arm.peak_memory_bytes,
            chunk_peak_memory_bytes=list(arm.chunk_peaks),
            losses=list(arm.losses[: plan.parity_steps]),
            compile_s=arm.compile_s,
            warmup_s=arm.warmup_s,
            # The measurement alone: later trials and the final A/B are sized from it.
            wall_s=measured_s,
            chunk_times_s=list(arm.chunk_scores),
            reference_losses=references,
            device_switch_s=switched(arm.switch_s),
            sharing_mode=sharing.mode if sharing is not None else None,
        )
        # In turns no arm stays on the device between trials (the references ended it).
        self.live.best = None if self.live.in_turns else arm
        return result

    def _references(self, arm: Arm, recipe: dict[str, Any]) -> list[list[float | None]]:
        """The baseline's quality reference runs: beside its parked arm when two processes
        fit, else each in a process of its own with the arm ended first. A reference that
        runs out of memory beside the parked arm is no failure of the baseline recipe: the
        arms go into turns and the references run alone."""
        plan, timeout = self.plan, self.allowance.budget.request_timeout
        runs = range(1, self.reference_runs + 1)
        if not self.live.in_turns:
            try:
                return [arm.reference_losses(i, plan.parity_steps, timeout=timeout) for i in runs]
            except WorkerFailure as exc:
                forced = self.live.forced is not None
                if exc.kind != "oom" or self.live.sharing is None or forced:
                    arm.close()
                    raise self._reference_failed(exc) from None
                self.live.into_turns(
                    f"a quality reference ran out of memory beside it ({exc.reason})"
                )
        arm.close()  # one process on the device: the references run alone
        log = self.log_dir / "worker-reference.log" if self.log_dir else None
        try:
            return [
                self.live.source.reference_alone(
                    recipe, i, plan.parity_steps, timeout=timeout, log_path=log
                )
                for i in runs
            ]
        except WorkerFailure as exc:
            raise self._reference_failed(exc) from None

    def _reference_failed(self, exc: WorkerFailure) -> TuneError:
        """A quality reference run failed: a second run of the baseline recipe, not the
        baseline, which ran (on a GPU: alone in turns, or beside the parked baseline)."""
        if exc.kind == "timeout" and self.allowance.budget.remaining_s() <= 0:
            return self.allowance.too_small()
        where, hint = "", "check that it runs twice in a row (`torchdoctor run`; a script: python)"
        if self.live.in_turns:
            where = ", alone on the GPU"
            if exc.kind == "oom":  # it ran out of memory alone, as the baseline did not
                hint = (
                    "start from a recipe with room to spare: the same effective batch in "
                    "smaller micro-batches (--set batch_size=B/k --set grad_accum=k)"
                )
        elif self.live.sharing is not None:
            where = ", beside the baseline's parked process"
            if exc.kind == "oom":
                hint = "let the arms take turns on the GPU (the study forced them to interleave)"
        return TuneError(
            f"the baseline ran, but a quality reference run of it (a second run of the same "
            f"recipe{where}) failed ({exc.kind}): {exc.reason}",
            hint=hint,
        )
