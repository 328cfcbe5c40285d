"""Arms on a GPU: chunks at the event timer's length, calibrated from steady steps, so that the
ladder and the final confirmation score a recipe with an epoch restart alike."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from gpu_costs import EpochJob
from torchdoctor.core.vocabulary import Objective
from torchdoctor.measure import CUDA_EVENT_MIN_CHUNK_S, MIN_CHUNK_S, PairedSpeedup, TimerKind
from torchdoctor.tune.arms import Arm, MeasurePlan, interleave_until_clear, warm_arm
from torchdoctor.tune.confirm import measure_fresh_pairs
from torchdoctor.tune.records import Confirmation

PLAN = MeasurePlan()
#: The plan as it was: chunks from the last warm-up steps, the host's floor on a GPU too.
OLD_PLAN = replace(PLAN, calibrate_steady=False, event_min_chunk_s=MIN_CHUNK_S)

# The H200's cnn: 64 steps an epoch. Without loader workers a step waits for its batch (30 ms);
# with 32 workers it takes 12 ms, and each epoch forks them again (0.6 s).
EPOCH = 64
JOBS: dict[bool, dict[str, Any]] = {
    False: {"step_s": 0.030, "restart_s": 0.0},
    True: {"step_s": 0.012, "restart_s": 0.6},
}
#: What a long run sees, restarts included
TRUE_SPEEDUP = 0.030 / (0.012 + 0.6 / EPOCH)


def timeout() -> float:
    return 60.0


def gpu_arm(
    workers: bool, *, seed: int, process_factor: float = 1.0, timer: TimerKind = "cuda_event"
) -> Arm:
    job = EpochJob(
        epoch_steps=EPOCH, refill_s=0.002, seed=seed, process_factor=process_factor,
        **JOBS[workers],
    )  # fmt: skip
    objective: Objective = "throughput"
    return Arm(
        recipe={"workers": workers},
        worker=job,  # type: ignore[arg-type]
        objective=objective,
        release_after_run=timer == "cuda_event",
        timer=timer,
    )


def ladder(plan: MeasurePlan, seed: int) -> PairedSpeedup:
    best = warm_arm(gpu_arm(False, seed=seed), plan, timeout=timeout)
    cand = warm_arm(gpu_arm(True, seed=seed + 1), plan, timeout=timeout)
    return interleave_until_clear(best, cand, plan, threshold=1.02, timeout=timeout)


def confirmation(plan: MeasurePlan, seed: int) -> Confirmation:
    rng = np.random.default_rng(seed)
    opened = 0

    def open_arm(recipe: dict[str, Any], tag: str) -> Arm:
        nonlocal opened
        opened += 1
        # Each fresh process of a recipe runs ~1% faster or slower than another.
        arm = gpu_arm(
            bool(recipe["workers"]), seed=seed + 100 + opened,
            process_factor=float(rng.lognormal(0.0, 0.01)),
        )  # fmt: skip
        return warm_arm(arm, plan, timeout=timeout)

    return measure_fresh_pairs(
        open_arm, {"workers": False}, {"workers": True}, key="k", step=0, steps=None,
        pairs=4, timeout=timeout, confidence=0.95, clock=lambda: 0.0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("timer", "floor"), [("cuda_event", CUDA_EVENT_MIN_CHUNK_S), ("host", MIN_CHUNK_S)]
)
def test_a_chunk_lasts_the_floor_of_the_timer_that_times_it(timer: TimerKind, floor: float) -> None:
    arm = warm_arm(gpu_arm(False, seed=0, timer=timer), PLAN, timeout=timeout)
    dropped = 1 if timer == "cuda_event" else 0
    scored = arm.chunk_steps - dropped
    assert scored == max(PLAN.chunk_steps, math.ceil(floor / arm.step_s))
    assert arm.period is None


def test_a_gpu_arm_calibrates_whole_epochs_from_steady_steps() -> None:
    arm = warm_arm(gpu_arm(True, seed=0), PLAN, timeout=timeout)
    assert arm.period == EPOCH
    # The first step of a released chunk is not scored; the scored ones are whole epochs.
    assert (arm.chunk_steps - 1) % EPOCH == 0
    assert arm.step_s == pytest.approx(0.012 + 0.6 / EPOCH, rel=0.05)
    # Calibrated from the last warm-up steps, the chunk cut across epochs.
    old = warm_arm(gpu_arm(True, seed=0), OLD_PLAN, timeout=timeout)
    assert old.period is None and (old.chunk_steps - 1) % EPOCH != 0


def test_the_ladder_and_the_confirmation_agree_on_a_recipe_with_epoch_restarts() -> None:
    est = ladder(PLAN, seed=1)
    confirm = confirmation(PLAN, seed=2)
    assert confirm.ok and confirm.speedup is not None and confirm.speedup_ci is not None
    # The intervals overlap, the confirmation's holds the ladder's estimate, and both are what
    # a long run pays, restarts included (the ladder's pair has no process spread of its own,
    # so its interval is the chunks' alone and narrow).
    low, high = confirm.speedup_ci
    assert max(est.ci_low, low) <= min(est.ci_high, high)
    assert low <= est.speedup <= high
    assert low <= TRUE_SPEEDUP <= high
    assert est.speedup == pytest.approx(TRUE_SPEEDUP, rel=0.02)


def test_with_the_old_plan_the_ladders_chunks_split_on_the_restart() -> None:
    # The symptom the H200 showed: chunks from single warm-up steps hold a restart in some
    # rounds and not in others, and the ladder's interval spans both readings.
    old = ladder(OLD_PLAN, seed=1)
    new = ladder(PLAN, seed=1)
    assert (old.ci_high / old.ci_low) > 2 * (new.ci_high / new.ci_low)
    # and the confirmation's scoring (whose chunks drop a released arm's first step) missed
    # the restarts the ladder's chunks held in some rounds: the two disagreed.
    confirm = confirmation(OLD_PLAN, seed=2)
    assert confirm.speedup is not None and confirm.speedup > 1.5 * TRUE_SPEEDUP


def test_a_gpu_window_runs_on_until_an_epoch_longer_than_it_shows_its_period() -> None:
    # 100-step epochs of 13 ms steps: the 3 s window sees two restarts, one gap; the arm runs
    # on until the third shows the period. On the host's clock the window does not grow.
    def arm(timer: TimerKind) -> Arm:
        job = EpochJob(step_s=0.013, restart_s=0.58, epoch_steps=100, seed=3)
        a = Arm(
            recipe={}, worker=job,  # type: ignore[arg-type]
            objective="throughput", release_after_run=timer == "cuda_event", timer=timer,
        )  # fmt: skip
        return warm_arm(a, PLAN, timeout=timeout)

    gpu = arm("cuda_event")
    assert gpu.period == 100 and (gpu.chunk_steps - 1) % 100 == 0
    host = arm("host")
    assert host.period is None
