"""A study's live arms: a recipe applied is an arm opened from the study's `ArmSource`.

Where the arms come from is the `ArmSource` (tune/sources.py): a workload's workers unless a
script's or a job's source is given, on a GPU with workers started ahead of need
(`procs.WorkerPool`). `LiveArms` opens them (each open's time is a part of every trial's
estimate, `tune.allowance`), keeps the best recipe's arm live between trials, and holds how the
arms share the GPU (tune/turns.py): decided on the baseline's first park, or in turns from the
moment two processes no longer fit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from torchdoctor.procs import SessionSpec, WorkerPool, pool_size
from torchdoctor.tune.allowance import Allowance
from torchdoctor.tune.arms import Arm, MeasurePlan
from torchdoctor.tune.sources import ArmSource, WorkloadArms
from torchdoctor.tune.study import Study
from torchdoctor.tune.turns import DeviceSharing, SharingMode, decide_sharing, forced_sharing

#: Study attribute holding how the arms share the GPU (`LiveArms.sharing`, JSON).
SHARING_ATTR: Final = "device_sharing"


def workload_arms(
    spec: SessionSpec,
    plan: MeasurePlan,
    objective: str,
    *,
    isolate: bool,
    memory_cap_bytes: int | None,
    log_dir: Path | None,
) -> WorkloadArms:
    """The arms of `spec`'s workload. On a GPU, workers are started ahead of need
    (`procs.WorkerPool`, `procs.pool_size`)."""
    size = pool_size(spec.device, isolate=isolate)
    return WorkloadArms(
        spec,
        plan,
        objective,
        isolate=isolate,
        memory_cap_bytes=memory_cap_bytes,
        pool=WorkerPool(spec.device, size, log_dir=log_dir) if size else None,
    )


class LiveArms:
    """The arms a study opens (`open`), the best recipe's kept live between trials (`best`),
    and how they share the GPU (`sharing`; None on a CPU)."""

    def __init__(
        self,
        source: ArmSource,
        allowance: Allowance,
        study: Study,
        *,
        log_dir: Path | None,
        step: Callable[[], int],
        forced: SharingMode | None,
    ) -> None:
        self.source = source
        self.allowance = allowance
        self.study = study
        self.log_dir = log_dir
        #: The step the next trial records (names the arms' worker logs).
        self.step = step
        #: How arms share a GPU when forced (`TuneSettings.device_sharing`), else None.
        self.forced = forced
        self.best: Arm | None = None
        #: How the arms share the GPU, decided on the baseline (tune/turns.py); None on a CPU
        self.sharing: DeviceSharing | None = None

    @property
    def in_turns(self) -> bool:
        """Whether arms run one process on the GPU at a time (tune/whole_runs.py)."""
        return self.sharing is not None and self.sharing.in_turns

    def open(
        self,
        recipe: dict[str, Any],
        tag: str,
        *,
        give_up_above: float | None = None,
        changed: tuple[str, ...] = (),
    ) -> Arm:
        """A live, warmed-up arm of `recipe` from the study's `ArmSource` (see `changed`
        there: a script arm whose changed knob did not act is not warmed up)."""
        log = self.log_dir / f"worker-{self.step():03d}-{tag}.log" if self.log_dir else None
        budget = self.allowance.budget
        began = budget.clock()
        arm = self.source.open(
            recipe,
            timeout=budget.request_timeout,
            log_path=log,
            give_up_above=give_up_above,
            changed=changed,
        )
        # Parts of every trial's estimate (`tune.cost`); an open the deadline cut raised.
        self.allowance.opens_s.append(budget.clock() - began)
        arm.on_close, arm.close_clock = self.allowance.closes_s.append, budget.clock
        return arm

    def close(self, *, at_once: bool = False) -> None:
        """End the best recipe's live arm, if one is."""
        if self.best is not None:
            self.best.close(at_once=at_once)
            self.best = None

    def hand_off(self, arm: Arm | None, *, kept: bool) -> None:
        """After a trial: its kept candidate's arm (`arm`) is the live best from here; one
        not kept is ended."""
        if kept and arm is not None:
            self.close()
            self.best = arm
        elif arm is not None:
            arm.close()

    def share_device(self, arm: Arm) -> None:
        """Decide how the study's arms share the GPU (tune/turns.py) from the measured
        baseline arm: park it, and read what moved, what stayed and the device's capacity
        against its peak. A CPU arm shares nothing: no decision, nothing parked."""
        if arm.turns is None:
            return
        if self.forced is not None:
            self.sharing = forced_sharing(self.forced)
        else:
            parked = self.source.turns.clear(timeout=self.allowance.budget.request_timeout)
            if parked is None:  # not resident: nothing measured, the arms interleave
                return
            self.sharing = decide_sharing(parked, arm.peak_memory_bytes or 0)
        self.study.set_attr(SHARING_ATTR, self.sharing.to_json_dict())

    def restore_sharing(self) -> None:
        """A resumed study's sharing, as its baseline decided it (read from the study)."""
        stored = self.study.attr(SHARING_ATTR)
        if stored:
            self.sharing = DeviceSharing.from_json_dict(stored, source="the study")

    def into_turns(self, why: str) -> None:
        """Two processes did not fit after all: the study's arms run in turns from here."""
        sharing = self.sharing or forced_sharing("turns")
        self.sharing = sharing.model_copy(
            update={"mode": "turns", "reason": f"{sharing.out_of_memory()}: {why}"}
        )
        self.study.set_attr(SHARING_ATTR, self.sharing.to_json_dict())

    def may_take_turns(self) -> bool:
        """Whether an out-of-memory trial beside a parked arm may be measured again in turns:
        on a GPU whose sharing was measured (not forced), not in turns already."""
        sharing = self.sharing
        return sharing is not None and not sharing.forced and not sharing.in_turns


def switched(seconds: float) -> float | None:
    """A trial's parking cost as recorded: None when no arm was parked (a CPU job)."""
    return seconds if seconds > 0 else None
