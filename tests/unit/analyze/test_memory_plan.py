"""The owners' split, the fit, and the largest batch under a budget, on made-up steps."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from torchdoctor.analyze.memory_fit import (
    CHECKPOINT_PAYS_SHARE,
    envelope_lines,
    fit_line,
    plan_memory,
    predict_max_batch,
    split_owners,
)
from torchdoctor.analyze.memory_study import edge_from_guess, measured_edge, oom_edge, under_cap
from torchdoctor.core.errors import TorchDoctorError, UsageError
from torchdoctor.core.memory_owners import CappedStep, LinearFit, MemoryPlan, StepMemory

PARAMS, STATE = 1000, 2000
ACT_PER_SAMPLE = 300


def _step(b: int, *, reserved_extra: int | None = None) -> StepMemory:
    # Two points of a step's timeline: the end of the forward (activations, growing fast) and
    # the optimizer's step (gradients and per-parameter temporaries, growing slowly).
    forward = PARAMS + STATE + ACT_PER_SAMPLE * b + 5 * b
    optimizer = PARAMS + STATE + 3 * PARAMS + 5 * b
    peaks = {"forward_backward": forward, "optimizer": optimizer}
    return StepMemory(
        batch_size=b,
        device="cpu" if reserved_extra is None else "cuda:0",
        source="tensors" if reserved_extra is None else "cuda_allocator",
        parameters_bytes=PARAMS,
        gradients_bytes=PARAMS,
        optimizer_state_bytes=STATE,
        activations_bytes=ACT_PER_SAMPLE * b,
        phase_peaks=peaks,
        phase_reserved_peaks=None
        if reserved_extra is None
        else {k: v + reserved_extra for k, v in peaks.items()},
        timeline=[forward, optimizer],
    )


def test_fit_line_recovers_a_line_and_its_residual() -> None:
    fit = fit_line([1, 2, 3], [10.0, 12.0, 14.0])
    assert fit.fixed_bytes == pytest.approx(8.0)
    assert fit.per_sample_bytes == pytest.approx(2.0)
    assert fit.residual_bytes == pytest.approx(0.0, abs=1e-9)
    noisy = fit_line([1, 2, 3], [10.0, 13.0, 14.0])
    assert noisy.residual_bytes > 0
    with pytest.raises(UsageError, match="two distinct batch sizes"):
        fit_line([4, 4], [1.0, 2.0])


def test_split_owners_at_the_peak_adds_up_to_it() -> None:
    step = _step(100).model_copy(
        update={"at_peak": {"activations": 25_000, "gradients": 0, "temporaries": 5_500}}
    )
    owners = split_owners(step)
    assert owners.activations_at_peak_bytes == 25_000 and owners.gradients_at_peak_bytes == 0
    assert owners.activations_saved_bytes == ACT_PER_SAMPLE * 100
    parts = (
        owners.parameters_bytes
        + owners.optimizer_state_bytes
        + owners.gradients_at_peak_bytes
        + owners.activations_at_peak_bytes
        + owners.temporaries_bytes
    )
    assert parts == owners.peak_bytes
    assert owners.slack_bytes is None


def test_split_owners_without_the_peak_moment_takes_owners_whole() -> None:
    small = split_owners(_step(1))  # the optimizer's step binds: room for temporaries
    assert small.peak_bytes == PARAMS + STATE + 3 * PARAMS + 5
    assert small.temporaries_bytes == small.peak_bytes - (2 * PARAMS + STATE + ACT_PER_SAMPLE)
    big = split_owners(_step(100))  # activations and gradients never held together
    assert big.temporaries_bytes == 0  # never below 0
    gpu = split_owners(_step(100, reserved_extra=4096))
    assert gpu.slack_bytes == 4096 and gpu.footprint_bytes == gpu.peak_bytes + 4096


def test_prediction_follows_the_line_that_binds_past_the_measured_batches() -> None:
    # Measured where the optimizer binds (a line through the peaks would be nearly flat),
    # predicted where the forward's activations bind.
    steps = [_step(b) for b in (1, 2, 4)]
    assert all(s.peak_bytes == s.phase_peaks["optimizer"] for s in steps)
    budget = 100_000
    plan = plan_memory("toy", steps, budget_bytes=budget)
    truth = max(b for b in range(1, 10_000) if _step(b).peak_bytes <= budget)
    assert plan.max_batch == truth
    assert predict_max_batch(plan, budget) == truth
    assert plan.edge_fit.per_sample_bytes == pytest.approx(ACT_PER_SAMPLE + 5)
    assert plan.activation_share >= CHECKPOINT_PAYS_SHARE and plan.checkpointing_pays
    assert plan.max_batch_without_activations is not None
    assert plan.max_batch_without_activations > plan.max_batch
    # The naive line through the peaks alone would predict far too large a batch.
    assert predict_max_batch(plan.peak_fit, budget) > 10 * truth
    assert MemoryPlan.from_json_dict(plan.to_json_dict()) == plan


def test_slack_is_part_of_the_gpu_footprint() -> None:
    cpu = plan_memory("toy", [_step(b) for b in (8, 16, 32)], budget_bytes=50_000)
    gpu = plan_memory(
        "toy", [_step(b, reserved_extra=2048) for b in (8, 16, 32)], budget_bytes=50_000
    )
    assert gpu.max_batch is not None and cpu.max_batch is not None
    assert gpu.max_batch < cpu.max_batch
    assert gpu.footprint_at(gpu.max_batch) <= 50_000 < gpu.footprint_at(gpu.max_batch + 1)


def test_unaligned_timelines_fall_back_to_the_peak_line() -> None:
    steps = [_step(2), _step(4).model_copy(update={"timeline": [1, 2, 3]})]
    assert envelope_lines(steps) is None
    plan = plan_memory("toy", steps)
    assert plan.envelope == [plan.peak_fit] and plan.max_batch is None


def test_a_budget_below_the_fixed_memory_is_a_usage_error() -> None:
    line = LinearFit(
        fixed_bytes=1000.0, per_sample_bytes=10.0, residual_bytes=0.0, batch_sizes=[1, 2]
    )
    assert predict_max_batch(line, 1100) == 10
    with pytest.raises(UsageError, match="fits no batch"):
        predict_max_batch(line, 999)
    with pytest.raises(UsageError, match="fits no batch"):
        predict_max_batch(line, 1005)  # the fixed part fits, one sample does not
    flat = line.model_copy(update={"per_sample_bytes": 0.0})
    with pytest.raises(UsageError, match="does not grow"):
        predict_max_batch(flat, 5000)


def test_measured_edge_bisects_to_the_largest_batch_under_the_cap() -> None:
    calls: list[int] = []

    def measure(b: int) -> StepMemory:
        calls.append(b)
        return _step(b)

    cap = 60_000
    truth = max(b for b in range(1, 2000) if _step(b).peak_bytes <= cap)
    assert measured_edge(under_cap(measure, cap), low=1, high=1024) == truth
    assert len(calls) <= 12  # bisection, not a sweep
    assert measured_edge(under_cap(measure, 10**9), low=1, high=64) == 64
    assert measured_edge(under_cap(measure, 10), low=1, high=64) == 0


def test_the_process_base_is_the_resident_set_less_the_resident_tensors() -> None:
    steps = [_step(b).model_copy(update={"process_rss_bytes": 10**6 + b}) for b in (2, 4)]
    plan = plan_memory("toy", steps)
    assert plan.process_base_bytes == pytest.approx(10**6 + 3 - PARAMS - STATE)
    gpu = plan_memory("toy", [_step(b, reserved_extra=0) for b in (2, 4)])
    assert gpu.process_base_bytes is None


def test_measured_edge_stops_within_its_resolution() -> None:
    calls: list[int] = []

    def fits(b: int) -> bool:
        calls.append(b)
        return b <= 1000

    edge = measured_edge(fits, low=1, high=2000, resolution=0.01)
    assert 990 <= edge <= 1000 and fits(edge)
    exact = len(calls)
    calls.clear()
    assert measured_edge(fits, low=1, high=2000) == 1000
    assert exact < len(calls)


def _probe(edge: int, *, over: str = "oom") -> Callable[[int], CappedStep]:
    def probe(batch: int) -> CappedStep:
        outcome = "fits" if batch <= edge else over
        return CappedStep(batch=batch, budget_bytes=10**6, outcome=outcome)

    return probe


def test_oom_edge_bisects_real_probes_and_keeps_them() -> None:
    found = oom_edge("toy", 10**6, high=512, probe=_probe(300), resolution=0.0)
    assert (found.edge, found.first_over, found.high) == (300, 301, 512)
    assert found.probes[0].batch == 512  # the top first: it may fit
    assert {p.outcome for p in found.probes} == {"fits", "oom"}
    # A probe that died under the cap without an answer is a refused allocation too.
    assert 297 <= oom_edge("toy", 10**6, high=512, probe=_probe(300, over="crash")).edge <= 300


@pytest.mark.parametrize("outcome", ["error", "timeout"])
def test_oom_edge_stops_at_a_probe_that_failed_for_another_reason(outcome: str) -> None:
    with pytest.raises(TorchDoctorError, match=f"another reason than memory \\({outcome}\\)"):
        oom_edge("toy", 10**6, high=512, probe=_probe(300, over=outcome))


@pytest.mark.parametrize("truth", [0, 1, 80, 97, 100, 104, 130, 400, 512])
def test_an_edge_searched_from_a_guess_is_the_edge(truth: int) -> None:
    calls: list[int] = []

    def fits(b: int) -> bool:
        calls.append(b)
        return b <= truth

    assert edge_from_guess(fits, guess=100, low=1, high=512) == truth
    if 95 <= truth <= 105:  # a guess within 5%: a bracket of 5 batches, found in few probes
        assert len(calls) <= 5
    near = edge_from_guess(fits, guess=100, low=1, high=512, resolution=0.01)
    assert truth - max(1, int(truth * 0.01)) <= near <= truth and fits(near)
