"""The memory ladder (`tune --objective fit`): its decisions, on simulated sessions whose peak
memory follows a declared model (tests/sim_session.py: fixed bytes plus bytes per sample of
the micro-batch, times each knob's memory factor)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from torchdoctor.core.errors import TuneError, UsageError
from torchdoctor.procs import SessionSpec
from torchdoctor.report import render_report, render_result
from torchdoctor.tune import Study, TuneConfig, Tuner, tune
from torchdoctor.tune.fit import climb_fit, fit_plan
from torchdoctor.tune.fit_decisions import (
    MIN_MEMORY_SAVING,
    BatchProbe,
    PeakMemory,
    fits,
    lowers_memory,
    next_batch,
)
from torchdoctor.tune.records import TuneResult
from torchdoctor.tune.space import recipe_validator
from torchdoctor.tune.tuner import TuneSettings
from tune_sim import sim_config

MiB = 2**20


def _fit_config(cap_mib: int, baseline: dict[str, Any] | None = None, **model: Any) -> TuneConfig:
    model = {"bytes_per_sample": MiB, "memory_noise": 0.002, "noise": 0.01, **model}
    config = sim_config([], **model)
    return config.model_copy(
        update={
            "objective": "fit",
            "max_memory_bytes": cap_mib * MiB,
            "baseline_recipe": dict(baseline or {}),
        }
    )


def _sim_tuner(config: TuneConfig) -> Tuner:
    """A tuner over the simulated sessions, its study in memory (a ladder driven directly)."""
    spec = SessionSpec(
        workload="sim",
        recipe=dict(config.baseline_recipe),
        factory=config.factory,
        options=dict(config.factory_options),
    )
    settings = TuneSettings(
        objective="fit", plan=config.plan, isolate=False, trial_timeout_s=config.trial_timeout_s
    )
    return Tuner(spec, settings, Study("sqlite://"))


def _rows(result: TuneResult) -> list[tuple[str, dict[str, Any], str]]:
    assert result.fit is not None
    return [(r.kind, r.change, r.outcome) for r in result.fit.rows]


def test_a_step_lowers_memory_only_when_every_peak_is_clearly_below() -> None:
    best = PeakMemory((100 * MiB, 101 * MiB, 102 * MiB))
    # The candidate's highest peak must be MIN_MEMORY_SAVING below the best's lowest.
    clear = int(100 * MiB * (1 - MIN_MEMORY_SAVING))
    assert lowers_memory(best, PeakMemory((clear - MiB, clear)))
    assert not lowers_memory(best, PeakMemory((90 * MiB, clear + MiB)))  # one draw too high
    assert not lowers_memory(best, PeakMemory((99 * MiB,)))  # 1% is within the noise bar
    # A recipe fits only when every chunk peaks under the cap.
    assert fits(PeakMemory((99 * MiB, 100 * MiB)), 100 * MiB)
    assert not fits(PeakMemory((90 * MiB, 101 * MiB)), 100 * MiB)


def test_the_batch_search_doubles_halves_and_bisects_to_the_edge() -> None:
    def search(start: int, edge: int) -> list[int]:
        tried = [BatchProbe(start, start <= edge)]
        while (b := next_batch(tried, 0, 4096)) is not None:
            tried.append(BatchProbe(b, b <= edge))
        return [p.batch for p in tried]

    # Up from a batch that fits: 64 and 128 fit, 256 does not, then bisection to within 1/8.
    assert search(32, 200) == [32, 64, 128, 256, 192, 224, 208]
    # Down from a batch that does not fit, then up again.
    assert search(32, 5) == [32, 16, 8, 4, 6, 5]
    # Nothing fits: stops at one sample.
    assert search(4, 0) == [4, 2, 1]


def test_a_batch_target_climbs_until_it_fits_and_stops(tmp_path: Path) -> None:
    # 100 MiB fixed + 32 MiB of activations; the cap of 112 MiB needs bf16 (x0.6: 119 MiB,
    # still over) and checkpointing (x0.5 more: 110 MiB). Accumulation is not needed then.
    config = _fit_config(
        112,
        {"batch_size": 32},
        fixed_bytes=100 * MiB,
        memory_effects={"precision": {"bf16": 0.6}, "checkpointing": {"True": 0.5}},
    )
    result = tune(config=config, out=tmp_path / "run")
    assert _rows(result) == [
        ("baseline", {}, "baseline"),
        # The simulated workload validates no recipe, so the first step is tried; it saves
        # nothing here (no memory_effects for it).
        ("memory", {"attention": "sdpa"}, "no_memory_saving"),
        ("memory", {"precision": "bf16"}, "kept"),
        ("memory", {"checkpointing": True}, "kept"),
    ]
    fit = result.fit
    assert fit is not None and not fit.baseline_fits and fit.fits
    assert fit.target_batch == 32 and fit.effective_batch == 32
    assert result.best_recipe == {"batch_size": 32, "precision": "bf16", "checkpointing": True}
    assert fit.baseline_peak_bytes is not None and fit.baseline_peak_bytes > 112 * MiB
    assert fit.peak_memory_bytes is not None and fit.peak_memory_bytes <= 112 * MiB
    assert any("over the cap" in n for n in result.notes)
    # The --json form carries the memory ladder: each row's peak, its spread and the batch.
    data = json.loads((tmp_path / "run" / "tune.json").read_text())
    rows = data["fit"]["rows"]
    assert [r["batch_size"] for r in rows] == [32, 32, 32, 32]
    low, high = rows[2]["peak_spread_bytes"]
    assert low <= rows[2]["peak_memory_bytes"] <= high < rows[0]["peak_spread_bytes"][0]
    # The terminal and the report show it too.
    console = Console(record=True, width=120)
    render_result(result, console)
    shown = console.export_text()
    assert "Memory ladder: the effective batch of 32 under 112 MiB" in shown
    assert "precision=bf16" in shown and "checkpointing=True" in shown
    page = render_report(tmp_path / "run", "md").read_text()  # (the HTML draws charts: slow)
    assert "## Memory ladder" in page and "fit the effective batch of 32" in page
    assert "over the cap" in page  # the baseline's peak, over the cap


def test_attention_is_the_first_step_and_is_reported_like_the_others(tmp_path: Path) -> None:
    # Hand-written attention's scores are most of the activations: sdpa (x0.3) takes the
    # baseline's 132 MiB to 110 MiB, under the cap of 120 MiB on its own, and the ladder stops
    # before bf16 or checkpointing cost anything.
    config = _fit_config(
        120,
        {"batch_size": 32},
        fixed_bytes=100 * MiB,
        memory_effects={"attention": {"sdpa": 0.3}, "precision": {"bf16": 0.5}},
    )
    result = tune(config=config, out=tmp_path / "run")
    assert _rows(result) == [
        ("baseline", {}, "baseline"),
        ("memory", {"attention": "sdpa"}, "kept"),
    ]
    assert result.best_recipe == {"batch_size": 32, "attention": "sdpa"}
    fit = result.fit
    assert fit is not None and fit.fits and fit.effective_batch == 32
    kept = fit.rows[1]
    assert kept.loss_deviation is not None  # held to the quality check like every step
    assert kept.peak_spread_bytes is not None and kept.peak_spread_bytes[1] <= 120 * MiB
    console = Console(record=True, width=120)
    render_result(result, console)
    assert "attention=sdpa" in console.export_text()


def test_where_the_workload_has_no_hand_written_attention_the_step_does_not_apply() -> None:
    # The real validator (a workload without an `attention` parameter): the step is skipped
    # with the knob's reason, which the result's notes show, and no trial is spent on it.
    config = _fit_config(
        120,
        {"batch_size": 32},
        fixed_bytes=100 * MiB,
        memory_effects={"attention": {"sdpa": 0.3}, "precision": {"bf16": 0.5}},
    ).model_copy(update={"knobs": ["attention", "precision"]})
    validate = recipe_validator("mlp", "cpu")
    plan = fit_plan(config, validate, default_batch=32)
    tuner = _sim_tuner(config)
    try:
        outcome = climb_fit(tuner, plan)
    finally:
        tuner.close()
    assert [(t.kind, t.change) for t in tuner.trials] == [
        ("baseline", {}),
        ("memory", {"precision": "bf16"}),
    ]
    reasons = [why for why, knobs in outcome.skipped.items() if "attention" in knobs]
    assert reasons and "has no 'attention' parameter" in reasons[0]


def test_steps_that_save_nothing_or_train_differently_are_rejected(tmp_path: Path) -> None:
    # bf16 saves no memory here; checkpointing saves but moves the loss far from the
    # baseline's; accumulation (16 x 2, the effective batch kept) brings it under the cap.
    config = _fit_config(
        120,
        {"batch_size": 32},
        fixed_bytes=100 * MiB,
        memory_effects={"checkpointing": {"True": 0.5}},
        loss_shift={"checkpointing": {"True": 0.5}},
    )
    result = tune(config=config, out=tmp_path / "run")
    assert _rows(result) == [
        ("baseline", {}, "baseline"),
        ("memory", {"attention": "sdpa"}, "no_memory_saving"),
        ("memory", {"precision": "bf16"}, "no_memory_saving"),
        ("memory", {"checkpointing": True}, "quality"),
        ("memory", {"batch_size": 16, "grad_accum": 2}, "kept"),
    ]
    assert result.best_recipe == {"batch_size": 16, "grad_accum": 2}
    assert result.fit is not None and result.fit.fits and result.fit.effective_batch == 32
    # The effective batch is the baseline's: no note that the learning dynamics changed.
    assert not any(n.startswith("the effective batch changed") for n in result.notes)


def test_without_a_target_the_largest_batch_that_fits_is_found(tmp_path: Path) -> None:
    # bf16 halves the activations: from 32 (32 MiB) the edge under 100 MiB is 200 samples.
    config = _fit_config(100, memory_effects={"precision": {"bf16": 0.5}})
    result = tune(config=config, out=tmp_path / "run")
    fit = result.fit
    assert fit is not None and fit.target_batch is None and fit.fits
    assert result.best_recipe["precision"] == "bf16"
    batch = result.best_recipe["batch_size"]
    assert batch * 0.5 * MiB <= 100 * MiB  # it fits the model
    over = [r.batch_size for r in fit.rows if r.outcome == "over_cap"]
    assert over and min(over) * 0.5 * MiB > 100 * MiB  # the smallest batch over is over
    assert min(over) - batch <= batch // 8  # and within the search's resolution of it
    assert fit.batch_size == batch and fit.effective_batch == batch


def test_a_share_of_the_baseline_is_resolved_once_and_a_resume_replays_it(
    tmp_path: Path,
) -> None:
    # --max-memory 90%: 90% of the baseline's 132 MiB; bf16 (x0.5: 116 MiB) fits it.
    config = _fit_config(
        100, {"batch_size": 32}, fixed_bytes=100 * MiB, memory_effects={"precision": {"bf16": 0.5}}
    ).model_copy(update={"max_memory_bytes": None, "max_memory_fraction": 0.9})
    first = tune(config=config, out=tmp_path / "run")
    fit = first.fit
    assert fit is not None and fit.fits and not fit.baseline_fits
    assert fit.baseline_peak_bytes is not None and fit.max_memory_fraction == 0.9
    assert fit.max_memory_bytes == pytest.approx(0.9 * fit.baseline_peak_bytes, rel=1e-6)
    assert first.best_recipe == {"batch_size": 32, "precision": "bf16"}
    again = tune(resume=tmp_path / "run", config=config)
    assert again.n_reused == again.n_trials == first.n_trials
    assert again.fit == fit and again.best_recipe == first.best_recipe


def test_the_batch_seam_sees_each_probe_and_its_peak() -> None:
    # A chooser in place of `next_batch` (as a memory model would be) is told every probe's
    # measured peak, and its choice is what the search tries.
    seen: list[list[BatchProbe]] = []

    def one_guess(tried: Any, cap: int, max_batch: int) -> int | None:
        seen.append(list(tried))
        return 96 if len(tried) == 1 else None

    # --knobs checkpointing: the memory ladder tries that step alone before the batch search.
    config = _fit_config(100, memory_noise=0.0).model_copy(update={"knobs": ["checkpointing"]})
    plan = replace(fit_plan(config, None, default_batch=32), choose_batch=one_guess)
    tuner = _sim_tuner(config)
    try:
        climb_fit(tuner, plan)
    finally:
        tuner.close()
    assert [[(p.batch, p.fits, p.peak_bytes) for p in probes] for probes in seen] == [
        [(32, True, 32 * MiB)],
        [(32, True, 32 * MiB), (96, True, 96 * MiB)],
    ]
    assert tuner.best_recipe["batch_size"] == 96
    assert [(t.kind, t.change) for t in tuner.trials] == [
        ("baseline", {}),
        ("memory", {"checkpointing": True}),
        ("batch", {"batch_size": 96}),
    ]


def test_a_baseline_the_device_cannot_hold_says_where_to_start(tmp_path: Path) -> None:
    # The simulated device holds 40 MiB; the baseline's 32 samples take 132 MiB.
    config = _fit_config(
        100, {"batch_size": 32}, fixed_bytes=100 * MiB, memory_limit_bytes=40 * MiB
    )
    with pytest.raises(TuneError, match=r"baseline recipe failed \(oom\)") as failed:
        tune(config=config, out=tmp_path / "run")
    assert "grad_accum=k" in (failed.value.hint or "")


def test_fit_needs_a_cap(tmp_path: Path) -> None:
    # The stage refuses a hand-built config as `torchdoctor.tune` refuses the same request:
    # bad input, in the same words (core/vocabulary.py).
    config = _fit_config(100).model_copy(update={"max_memory_bytes": None})
    with pytest.raises(UsageError, match="--max-memory"):
        tune(config=config, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()  # refused before anything is written
