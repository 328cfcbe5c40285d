"""The sequential A/B: clear decisions stop at the first look, unclear ones run to the last."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchdoctor.measure import LAST_LOOK_SHARE
from torchdoctor.tune import KnobSpec, tune
from torchdoctor.tune.arms import REPLICATE_CONFIDENCE, MeasurePlan, replicate_plan
from torchdoctor.tune.space import catalogue_space, order_knobs, static_prior
from tune_sim import FAST_KNOB, NOOP_KNOB, sim_config

SLOW_KNOB = KnobSpec("slow", (False, True), "exact", False)


def _scored_rounds(run: Path, knob: str) -> int:
    from torchdoctor.tune.records import read_trial

    for path in sorted((run / "trials").iterdir()):
        trial = read_trial(path)
        if trial.kind == "ladder" and knob in trial.change:
            return len(trial.chunk_times_s)
    raise AssertionError(f"no trial of {knob}")


def test_looks_and_their_bonferroni_confidence() -> None:
    plan = MeasurePlan(min_rounds=6, rounds=12, look_every=2, confidence=0.95)
    assert plan.looks() == [6, 8, 10, 12]
    assert abs(plan.look_confidence() - (1 - 0.05 * (1 - LAST_LOOK_SHARE) / 3)) < 1e-12
    assert abs(plan.look_confidence(last=True) - (1 - 0.05 * LAST_LOOK_SHARE)) < 1e-12
    # A plan shorter than its first look has one look, at its last round.
    assert MeasurePlan(min_rounds=6, rounds=4).looks() == [4]


def test_the_second_pair_runs_the_same_schedule_at_its_own_confidence() -> None:
    plan = MeasurePlan(min_rounds=6, rounds=24, look_every=2, confidence=0.95)
    again = replicate_plan(plan)
    assert again.looks() == plan.looks()
    alpha = 1 - REPLICATE_CONFIDENCE
    assert abs(again.look_confidence(last=True) - (1 - alpha * LAST_LOOK_SHARE)) < 1e-12
    # Its earlier looks share the rest, so the second pair's whole false-pass rate is alpha.
    earlier = (len(again.looks()) - 1) * (1 - again.look_confidence())
    assert abs(earlier + (1 - again.look_confidence(last=True)) - alpha) < 1e-12


def test_the_ladder_judges_its_first_pair_at_the_study_confidence(tmp_path: Path) -> None:
    from torchdoctor.tune.records import read_trial

    # A do-nothing knob under noise runs to the last look and is rejected there; the reason
    # gives the interval the decision used.
    config = sim_config([NOOP_KNOB], noise=0.05)
    tune(config=config, out=tmp_path / "run")
    last = config.plan.look_confidence(last=True)
    trials = [read_trial(path) for path in sorted((tmp_path / "run" / "trials").iterdir())]
    reasons = [t.reason for t in trials if t.kind == "ladder"]
    assert reasons and all(f"{last:.1%} CI" in (r or "") for r in reasons), reasons


def test_clear_win_and_clear_loss_stop_at_the_first_look(tmp_path: Path) -> None:
    config = sim_config(
        [FAST_KNOB, SLOW_KNOB], noise=0.01, effects={"fast": {"True": 0.5}, "slow": {"True": 2.0}}
    )
    plan = config.plan
    result = tune(config=config, out=tmp_path / "run")
    assert result.best_recipe == {"fast": True}
    assert _scored_rounds(tmp_path / "run", "fast") == plan.looks()[0]
    assert _scored_rounds(tmp_path / "run", "slow") == plan.looks()[0]


def test_an_unclear_change_runs_past_the_first_look(tmp_path: Path) -> None:
    # A do-nothing knob under noise: at 6 rounds its interval still straddles 1.02.
    config = sim_config([NOOP_KNOB], noise=0.05)
    result = tune(config=config, out=tmp_path / "run")
    assert result.best_recipe == {}
    assert _scored_rounds(tmp_path / "run", "noop") > config.plan.looks()[0]


def test_cpu_prior_puts_compile_then_threads_first_and_skips_cuda_graph_modes() -> None:
    specs = catalogue_space("cpu")
    ordered = [s.name for s in order_knobs(specs, prior=static_prior("cpu"))]
    assert ordered[:3] == ["compile", "threads", "num_workers"]
    compile_values = next(s.values for s in specs if s.name == "compile")
    assert "reduce-overhead" not in compile_values and "default" in compile_values
    workers = next(s.values for s in specs if s.name == "num_workers")
    assert 0 in workers and max(workers) <= (os.cpu_count() or 1)


def test_cpu_prior_puts_precision_second_where_the_cpu_has_bf16_units() -> None:
    native = static_prior("cpu", native_bf16=True)
    assert native[:3] == ("compile", "precision", "threads")
    # Without bf16 units, bf16 is emulated (slower than fp32): precision stays late.
    emulated = static_prior("cpu")
    assert emulated.index("precision") > emulated.index("optimizer_impl")
    assert sorted(native) == sorted(emulated)
    # A GPU has its own order, whatever the host CPU.
    assert static_prior("cuda", native_bf16=True) == static_prior("cuda")


def test_loader_workers_are_tried_most_first(monkeypatch: pytest.MonkeyPatch) -> None:
    # On a loader-bound step one worker hides only the compute; the core count's workers are
    # the likely win, so they come first while the budget lasts.
    import torchdoctor.tune.space as space

    monkeypatch.setattr(space, "usable_cores", lambda: 8)
    workers = next(s.values for s in catalogue_space("cpu") if s.name == "num_workers")
    assert workers[0] == 8 and list(workers) == sorted(workers, reverse=True)
