from __future__ import annotations

import math
import statistics

import pytest
import torch

from torchdoctor.core.steps import PHASES
from torchdoctor.engine import RunResult, run_workload
from torchdoctor.engine import run as engine_run
from torchdoctor.knobs import Recipe
from torchdoctor.measure import chunk_rates
from torchdoctor.workloads import get_workload

#: The issue's acceptance bound: phase fractions of each step sum to 1 within 2%.
FRACTION_SUM_TOLERANCE = 0.02


def _small_mlp():  # type: ignore[no-untyped-def]
    return get_workload("mlp", rows=1024, batch_size=64)


def test_two_fp32_eager_runs_have_identical_loss_trajectories() -> None:
    fixed = {"steps": 6, "warmup_steps": 2, "settle_warmup": False, "measure_phases": False}
    a = run_workload(_small_mlp(), Recipe(), seed=3, **fixed)  # type: ignore[arg-type]
    b = run_workload(_small_mlp(), Recipe(), seed=3, **fixed)  # type: ignore[arg-type]
    assert len(a.losses) == 8
    assert a.losses == b.losses
    c = run_workload(_small_mlp(), Recipe(), seed=4, **fixed)  # type: ignore[arg-type]
    assert c.losses != a.losses  # the seed matters


def test_the_default_window_times_seconds_of_steps_not_a_fixed_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `steps=None` (`torchdoctor run` without --steps): the least count first, then as many
    # more as `measure.steady_steps` asks at their median step time. The fake window asks for
    # more than the least count of 5 at any step time (a loaded host's steps are slower), and
    # for a count that depends on the step time it was given.
    asked: list[float] = []

    def window(step_s: float) -> int:
        asked.append(step_s)
        return 6 + min(math.ceil(0.25 / step_s), 20)

    monkeypatch.setattr(engine_run, "DEFAULT_STEADY_STEPS", 5)
    monkeypatch.setattr(engine_run, "steady_steps", window)
    result = run_workload(_small_mlp(), Recipe(), steps=None, warmup_steps=1, measure_phases=False)
    (step_s,) = asked  # judged once, from the least count's median
    assert len(result.steps) == 6 + min(math.ceil(0.25 / step_s), 20)
    assert result.step_time.n == len(result.steps)
    # An explicit count is exactly that many steps.
    fixed = run_workload(_small_mlp(), Recipe(), steps=7, warmup_steps=1, measure_phases=False)
    assert len(fixed.steps) == 7 and asked == [step_s]


def test_phase_fractions_sum_to_one_per_step() -> None:
    result = run_workload(_small_mlp(), Recipe(), steps=5, warmup_steps=1)
    assert len(result.phase_steps) == 5
    for step in result.phase_steps:
        assert set(step.phases) == set(PHASES)
        assert all(v >= 0 for v in step.phases.values())
        assert math.isclose(sum(step.fractions().values()), 1.0, abs_tol=FRACTION_SUM_TOLERANCE)
        assert step.phases["forward"] > 0 and step.phases["backward"] > 0
    assert result.phase_fractions is not None
    assert math.isclose(sum(result.phase_fractions.values()), 1.0, abs_tol=FRACTION_SUM_TOLERANCE)


def test_throughput_comes_from_steps_without_phase_syncs() -> None:
    # Per-phase syncs serialize launch and execution on a GPU: the throughput steps never
    # take them, and the phase split comes from separate steps after them.
    result = run_workload(_small_mlp(), Recipe(), steps=6, warmup_steps=1, phase_steps=4)
    assert all(step.phases == {} for step in result.steps) and len(result.steps) == 6
    assert len(result.phase_steps) == 4 and all(s.phases for s in result.phase_steps)
    assert result.step_time.n == 6
    first_phase = result.phase_steps[0].index
    assert first_phase == result.steps[-1].index + 1


def test_throughput_mode_skips_phases_but_counts_samples() -> None:
    result = run_workload(_small_mlp(), Recipe(), steps=4, warmup_steps=1, measure_phases=False)
    assert all(step.phases == {} for step in result.steps)
    assert result.phase_fractions is None
    assert result.samples_per_step == 64
    # The rate is the median over chunks of at least MIN_CHUNK_S (one chunk when the four
    # steps are quick, several on a slow host): each chunk counts 64 samples a step.
    rates = chunk_rates(result.steps)
    assert rates and result.samples_per_s == pytest.approx(statistics.median(rates))
    per_step = [64 / s.total_s for s in result.steps]
    assert min(per_step) <= result.samples_per_s <= max(per_step)
    assert result.tokens_per_s is None  # tabular rows have no tokens


def test_result_fields_and_json_round_trip() -> None:
    result = run_workload(
        _small_mlp(), Recipe.parse(["grad_accum=2"]), steps=3, warmup_steps=2, settle_warmup=False
    )
    assert result.workload == "mlp" and result.recipe == {"grad_accum": 2}
    assert [s.index for s in result.steps] == [2, 3, 4]
    assert result.first_step_s is not None and result.warmup_s >= result.first_step_s
    assert result.compile_s >= 0
    assert result.step_time.n == 3
    assert result.memory.cpu_peak_rss_bytes > 0
    assert all(s.samples == 128 for s in result.steps)
    assert RunResult.from_json_dict(result.to_json_dict()) == result


def test_bad_step_counts_are_engine_errors() -> None:
    from torchdoctor.core.errors import EngineError

    with pytest.raises(EngineError, match="steps"):
        run_workload(_small_mlp(), Recipe(), steps=0)
    if not torch.cuda.is_available():
        with pytest.raises(EngineError, match="cuda"):
            run_workload(_small_mlp(), Recipe(), device="cuda")
