"""A chunk's floor per timer, and its length calibrated from steady steps (stall periods)."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from torchdoctor.core.steps import StepTiming
from torchdoctor.measure import (
    CUDA_EVENT_MIN_CHUNK_S,
    MIN_CHUNK_S,
    calibrate_chunks,
    calibration_steps,
    chunk_rates,
    min_chunk_s,
    more_calibration_steps,
    stall_period,
)
from torchdoctor.measure._chunks import MIN_CALIBRATION_S, MIN_STALLS
from torchdoctor.measure._device_timer import CUDA_EVENT_RESOLUTION_S


def epoch_times(
    n: int, *, step_s: float, epoch: int, restart_s: float, seed: int = 0
) -> list[float]:
    """`n` step times with 2% noise and a loader restart on the first step of every epoch."""
    rng = np.random.default_rng(seed)
    return [
        step_s * float(rng.lognormal(0.0, 0.02)) + (restart_s if i % epoch == 0 else 0.0)
        for i in range(n)
    ]


def test_the_host_clock_keeps_its_floor_and_cuda_events_get_a_shorter_one() -> None:
    assert min_chunk_s("host") == MIN_CHUNK_S == 0.3
    assert min_chunk_s("cuda_event") == CUDA_EVENT_MIN_CHUNK_S
    # The event floor is far above what the events resolve and well below the host's.
    assert min_chunk_s("cuda_event") >= 10_000 * CUDA_EVENT_RESOLUTION_S
    assert min_chunk_s("cuda_event") <= min_chunk_s("host") / 5
    # 20 ms steps (an H200 cnn step): 15 steps a chunk on the host's clock, 3 on events.
    steps = [0.02] * 40
    assert calibrate_chunks(steps, least=1, floor_s=min_chunk_s("host")).steps == 15
    assert calibrate_chunks(steps, least=1, floor_s=min_chunk_s("cuda_event")).steps == 3


def test_a_calibration_window_on_a_gpu_is_long_enough_to_see_three_epoch_restarts() -> None:
    step_s = 0.015
    window = calibration_steps(step_s, "cuda_event", floor_s=min_chunk_s("cuda_event"))
    assert window * step_s >= MIN_CALIBRATION_S["cuda_event"]
    assert window >= MIN_STALLS * 64
    # On the host's clock the window is two chunks, what a trial spent on its settle round.
    assert calibration_steps(0.02, "host", floor_s=MIN_CHUNK_S) == 30


def test_a_restart_every_epoch_is_a_period_and_hiccups_are_not() -> None:
    times = epoch_times(200, step_s=0.012, epoch=64, restart_s=0.6)
    assert stall_period(times) == 64
    # Two restarts are one gap: a pair of scheduler hiccups looks the same.
    assert stall_period(times[:128]) is None
    hiccups = [0.01] * 200
    for i in (17, 60, 71, 150):
        hiccups[i] = 0.2
    assert stall_period(hiccups) is None


def test_chunks_calibrated_from_steady_steps_hold_whole_epochs() -> None:
    times = epoch_times(250, step_s=0.012, epoch=64, restart_s=0.6)
    cal = calibrate_chunks(times, least=4, floor_s=0.05, dropped=1)
    assert cal.period == 64
    assert cal.scored_steps % 64 == 0 and cal.steps == cal.scored_steps + 1
    # The mean step over whole epochs, each restart counted once per epoch, not the steady
    # step alone.
    assert cal.step_s == pytest.approx(0.012 + 0.6 / 64, rel=0.02)


def test_the_median_over_whole_period_chunks_is_the_rate_the_job_pays() -> None:
    times = epoch_times(64 * 12, step_s=0.012, epoch=64, restart_s=0.6)
    steps = [StepTiming(index=i, total_s=t, samples=32) for i, t in enumerate(times)]
    mean_rate = 32 * len(times) / sum(times)
    # 0.3 s chunks cut across epochs: most hold no restart, and their median drops it.
    assert chunk_rates(steps, period=1) and statistics.median(chunk_rates(steps, period=1)) > (
        1.5 * mean_rate
    )
    # Chunks of whole epochs (the period found in the steps themselves) count it in each.
    rates = chunk_rates(steps)
    assert all(abs(r / mean_rate - 1) < 0.05 for r in rates)


def test_a_window_grows_only_to_see_a_period_it_has_a_stall_of() -> None:
    times = epoch_times(230, step_s=0.013, epoch=100, restart_s=0.58)[5:]  # restarts at 95, 195
    more = more_calibration_steps(times, "cuda_event")
    assert more > 0
    grown = epoch_times(230 + more, step_s=0.013, epoch=100, restart_s=0.58)[5:]
    assert stall_period(grown) == 100
    assert more_calibration_steps(grown, "cuda_event") == 0
    # No stall, or the host's clock: the window is what it was.
    assert more_calibration_steps([0.013] * 200, "cuda_event") == 0
    assert more_calibration_steps(times, "host") == 0
