"""Where a tuner's arms come from: the one seam between the tuner and what it tunes.

`LiveArms.open` asks the study's `ArmSource` for a live, warmed-up `Arm` of a recipe; the ladder,
the joint search and the final confirmation (tune/confirm.py) all open arms through it, so they
work the same on both sources:

- `WorkloadArms`: a built-in (or factory) workload in a worker process (`torchdoctor.procs`);
- `ScriptArms`: a user's unmodified training script, launched with the recipe injected
  (collect/inject) and driven at its optimizer steps (`ScriptWorker`). Every arm gets the same
  seed, so that the quality check compares like with like; the quality yardstick is the
  script worker's `Reference` request (a fresh launch with the engine's no-op weight perturbation).

Where the study's arms run in turns on the GPU (tune/turns.py), a quality reference runs in a
process of its own with no arm on the device (`ArmSource.reference_alone`): a workload's
worker prepared with the perturbed spec, a script's fresh launch with the perturbed model.

A script arm also says which knobs of its recipe did not act in the script
(`Arm.not_applied`, read from the injection record at its ready boundary): a candidate whose
changed knob did not act is opened without warm-up, and the tuner ends its trial as
"does not apply" without an A/B.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torchdoctor.core.errors import TuneError
from torchdoctor.core.redact import redact_argv
from torchdoctor.procs import (
    FailureKind,
    Prepare,
    SessionSpec,
    WorkerFailure,
    WorkerPool,
    start_worker,
)
from torchdoctor.tune.arms import Arm, MeasurePlan, Timeout, warm_arm
from torchdoctor.tune.records import recipe_key
from torchdoctor.tune.torchrun import arm_argv, is_torchrun
from torchdoctor.tune.turns import DeviceTurns

__all__ = ["ArmSource", "ScriptArms", "ScriptCommand", "WorkloadArms", "not_applied_of"]


class ArmSource(ABC):
    """Opens live, warmed-up arms; a source says only how an arm is started and prepared."""

    plan: MeasurePlan
    #: one arm of this source on the GPU at a time (tune/turns.py)
    turns: DeviceTurns

    def close(self) -> None:  # noqa: B027 - most sources keep nothing started
        """End what this source keeps started for later arms (nothing, unless it says)."""

    @abstractmethod
    def prepare(self, recipe: dict[str, Any], *, timeout: Timeout, log_path: Path | None) -> Arm:
        """A started, prepared arm of `recipe`, not yet warmed up (raises WorkerFailure)."""

    def open(
        self,
        recipe: dict[str, Any],
        *,
        timeout: Timeout,
        log_path: Path | None,
        give_up_above: float | None = None,
        changed: Sequence[str] = (),
    ) -> Arm:
        """A live, warmed-up arm of `recipe` (raises WorkerFailure); one whose `changed` knobs
        include one that did not act is returned unwarmed (its trial ends as "does not
        apply")."""
        # A new process is about to take device memory: the resident arm leaves it first.
        self.turns.clear(timeout=timeout)
        arm = self.prepare(recipe, timeout=timeout, log_path=log_path)
        if arm.release_after_run:  # on a GPU: the arm takes turns with the others
            arm.turns = self.turns
            self.turns.resident = arm
        if any(k in arm.not_applied for k in changed):
            return arm  # its trial ends as "does not apply": no warm-up spent on it
        return warm_arm(arm, self.plan, timeout=timeout, give_up_above=give_up_above)

    def prepare_reference(
        self, recipe: dict[str, Any], perturbation: int, *, timeout: Timeout, log_path: Path | None
    ) -> Arm:
        """A started, prepared process of `recipe` whose model carries the no-op weight
        perturbation `perturbation` (a quality reference run of its own)."""
        raise TuneError(f"internal: {type(self).__name__} runs no quality reference alone")

    def reference_alone(
        self,
        recipe: dict[str, Any],
        perturbation: int,
        steps: int,
        *,
        timeout: Timeout,
        log_path: Path | None,
    ) -> list[float | None]:
        """The first `steps` losses of a quality reference run in a process of its own,
        started with no arm of this source on the device (the arms run in turns)."""
        self.turns.clear(timeout=timeout)
        arm = self.prepare_reference(recipe, perturbation, timeout=timeout, log_path=log_path)
        try:
            return [row.loss for row in arm.steps(steps, timeout=timeout, release=False)]
        finally:
            arm.close()


@dataclass(frozen=True)
class WorkloadArms(ArmSource):
    """Arms of a workload session spec, each in its own worker (the tuner's default)."""

    spec: SessionSpec
    plan: MeasurePlan
    objective: str
    isolate: bool = True
    memory_cap_bytes: int | None = None
    turns: DeviceTurns = field(default_factory=DeviceTurns, compare=False, repr=False)
    #: Workers started ahead of need (a GPU's: `procs.WorkerPool`); None starts each anew
    pool: WorkerPool | None = field(default=None, compare=False, repr=False)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()

    def prepare(self, recipe: dict[str, Any], *, timeout: Timeout, log_path: Path | None) -> Arm:
        return self._start(self.spec.with_recipe(recipe), timeout=timeout, log_path=log_path)

    def prepare_reference(
        self, recipe: dict[str, Any], perturbation: int, *, timeout: Timeout, log_path: Path | None
    ) -> Arm:
        spec = replace(self.spec.with_recipe(recipe), perturbation=perturbation)
        return self._start(spec, timeout=timeout, log_path=log_path)

    def _start(self, spec: SessionSpec, *, timeout: Timeout, log_path: Path | None) -> Arm:
        on_cuda = spec.device.split(":", 1)[0] == "cuda"
        started = self.pool.take(log_path=log_path) if self.pool and self.isolate else None
        worker, prepare_s = start_worker(
            spec,
            isolate=self.isolate,
            timeout_s=timeout(),
            memory_cap_bytes=self.memory_cap_bytes,
            log_path=log_path,
            started=started,
        )
        return Arm(
            recipe=dict(spec.recipe),
            worker=worker,
            objective=self.objective,  # type: ignore[arg-type]
            prepare_s=prepare_s,
            release_after_run=on_cuda,
            # The engine times a step on CUDA by events on its stream (engine/step_marks.py).
            timer="cuda_event" if on_cuda else "host",
        )


@dataclass(frozen=True)
class ScriptCommand:
    """`python SCRIPT ARGS` (argv = [SCRIPT, *ARGS]) or `python -m MODULE ARGS` (module)."""

    argv: tuple[str, ...]
    module: bool = False
    cwd: str | None = None

    def display(self) -> str:
        """The command as the user typed it, its secrets masked (core/redact.py)."""
        argv = redact_argv(list(self.argv))
        if is_torchrun(argv, self.module):
            return " ".join(["torchrun", *argv[1:]])
        return " ".join(["python", *(["-m"] if self.module else []), *argv])


def not_applied_of(injection: dict[str, Any] | None) -> dict[str, str]:
    """knob -> reason for each knob an `InjectionRecord` (JSON) says did not act."""
    if not injection:
        return {}
    return {
        str(k["knob"]): str(k.get("reason") or "")
        for k in injection.get("knobs", [])
        if k.get("status") == "not_applied"
    }


def own_settings_of(loaders: Sequence[dict[str, Any]] | None) -> dict[str, Any]:
    """The script's own loader knob values: those of the first DataLoader it iterated (the
    training loader, by its first step), so the ladder does not try what the script runs.

    The loader knobs the engine passes (`LoaderArgument.engine`), which `DataLoaderInfo`
    records under their keyword (batch_size is the batch-size search's, not the ladder's).
    """
    from torchdoctor.knobs import loader_arguments

    if not loaders:
        return {}
    first = loaders[0]
    return {
        name: first[part.keyword]
        for name, part in loader_arguments()
        if part.engine and first.get(part.keyword) is not None
    }


@dataclass(frozen=True)
class ScriptArms(ArmSource):
    """Arms of a user's script: one `ScriptWorker` launch per arm, the recipe injected."""

    command: ScriptCommand
    plan: MeasurePlan
    objective: str
    seed: int | None = 0
    memory_cap_bytes: int | None = None
    turns: DeviceTurns = field(default_factory=DeviceTurns, compare=False, repr=False)
    #: recipe key -> the injection record of that recipe's first arm (`Prepared.injection`,
    #: after the script's first whole iteration): where each knob acted, which the study's
    #: patch is built from (`tune.cure`) without launching the script once more
    injections: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False, repr=False)

    def prepare(self, recipe: dict[str, Any], *, timeout: Timeout, log_path: Path | None) -> Arm:
        return self._launch(recipe, 0, timeout=timeout, log_path=log_path)

    def injection_of(self, recipe: dict[str, Any]) -> dict[str, Any] | None:
        """The injection record of an arm that ran `recipe` unperturbed, if one was opened."""
        return self.injections.get(recipe_key(recipe))

    def prepare_reference(
        self, recipe: dict[str, Any], perturbation: int, *, timeout: Timeout, log_path: Path | None
    ) -> Arm:
        arm = self._launch(recipe, perturbation, timeout=timeout, log_path=log_path)
        if (getattr(arm.worker, "injection", None) or {}).get("model") is None:
            arm.close()
            raise WorkerFailure(
                FailureKind.ERROR,
                "no trained model was found in the script to perturb for the quality "
                "reference (no module owning an optimizer's parameters was called in "
                "training mode)",
            )
        return arm

    def _launch(
        self, recipe: dict[str, Any], perturbation: int, *, timeout: Timeout, log_path: Path | None
    ) -> Arm:
        from torchdoctor.procs import ScriptWorker

        argv = list(self.command.argv)
        if is_torchrun(argv, self.command.module):
            argv = arm_argv(argv)  # a rendezvous of its own: two arms live at once
        worker = ScriptWorker(
            argv,
            module=self.command.module,
            seed=self.seed,
            cwd=Path(self.command.cwd) if self.command.cwd else None,
            memory_cap_bytes=self.memory_cap_bytes,
            log_path=log_path,
            recipe=dict(recipe) if recipe else None,
            perturbation=perturbation,
        )
        try:
            reply = worker.request(Prepare(), timeout_s=timeout())
        except BaseException:
            worker.close(kill=True)
            raise
        arm = Arm(
            recipe=dict(recipe),
            worker=worker,
            objective=self.objective,  # type: ignore[arg-type]
            prepare_s=float(reply.prepare_s),
            # A script on a GPU shares it with the other arm's launch, as a workload's
            # worker does: its cached blocks go back after each chunk.
            release_after_run=reply.device == "cuda",
        )
        arm.not_applied = not_applied_of(reply.injection)
        arm.own_settings = own_settings_of(reply.loaders)
        if perturbation == 0 and reply.injection is not None:
            self.injections.setdefault(recipe_key(recipe), dict(reply.injection))
        return arm
