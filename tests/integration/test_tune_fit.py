"""`tune --objective fit` on real training: under a cap the baseline exceeds, the memory ladder
ends with a recipe that fits and trains with parity.

The workload (tests/data/workloads/wide_blocks.py) keeps most of its memory in activations, so
the ladder's steps move the worker's measured peak by tens of MiB. The cap is 90% of the
baseline's own measured peak (`--max-memory 90%`), which the baseline exceeds by construction
on any machine, whatever its interpreter and libraries take. The measurement plan is the
smallest the tuner accepts (one warm-up step, three one-step chunks, a four-step parity
window), so the study costs a worker process per trial and about 40 training steps.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from torchdoctor.tune import FitLadder, MeasurePlan, TuneConfig, tune

#: A real tuning run of a worker process per trial (the baseline, then one per step until it
#: fits, two or three): about 12 s on an idle 2-core host by its parts (process start and
#: import about 2 s each, some 40 steps of 30-50 ms, the baseline's six reference sessions);
#: measured 19 s at a load average of 5 on 2 cores, 73-103 s at 15. The memory ladder is no
#: A/B (tune/fit.py): its decisions rest on each process's own peak memory and on the losses,
#: never on timing, so these run with the untimed studies.
pytestmark = [pytest.mark.study, pytest.mark.untimed]

WORKLOAD = Path(__file__).parents[1] / "data" / "workloads" / "wide_blocks.py"
SMALLEST_PLAN = MeasurePlan(
    warmup_steps=1,
    chunk_steps=1,
    min_chunk_s=0.0,
    rounds=3,
    min_rounds=3,
    settle_rounds=0,
    parity_steps=4,
)


def _story(fit: FitLadder) -> str:
    """The ladder's rows, one a line, for an assertion's message."""
    return "\n".join(
        f"{r.kind} {r.change} {r.outcome} peak {r.peak_spread_bytes} {r.reason}" for r in fit.rows
    )


def test_fit_ends_with_a_recipe_that_fits_and_trains_alike(tmp_path: Path) -> None:
    config = TuneConfig(
        workload=f"{WORKLOAD}:make",
        objective="fit",
        max_memory_fraction=0.9,
        # A batch target: this effective batch must fit. One thread: steadier on a busy host.
        baseline_recipe={"batch_size": 1024, "threads": 1},
        budget_s=120,
        trial_timeout_s=60,
        plan=replace(SMALLEST_PLAN),
    )
    result = tune(config=config, out=tmp_path / "run")
    fit = result.fit
    assert fit is not None, result.notes
    story = _story(fit)
    assert not fit.baseline_fits and fit.baseline_peak_bytes is not None
    assert fit.baseline_peak_bytes > fit.max_memory_bytes, story
    # It ends fitting, with the effective batch held, on kept steps only.
    assert fit.fits, story
    assert fit.effective_batch == 1024
    assert fit.peak_memory_bytes is not None and fit.peak_memory_bytes <= fit.max_memory_bytes
    kept = [r for r in fit.rows[1:] if r.kept]
    assert kept, story
    # Every kept step lowered the peak, and trained within the baseline's own spread (the
    # quality check passed: a kept row has a loss deviation, measured).
    for before, row in zip([fit.rows[0], *kept], kept, strict=False):
        assert row.peak_spread_bytes is not None and before.peak_spread_bytes is not None
        assert row.peak_spread_bytes[1] < before.peak_spread_bytes[0], story
        assert row.loss_deviation is not None, story
    for row in kept:
        for knob, value in row.change.items():
            assert result.best_recipe[knob] == value


MANUAL_GPT = Path(__file__).parents[1] / "data" / "workloads" / "manual_gpt.py"


def test_fit_switches_hand_written_attention_to_sdpa_with_parity(tmp_path: Path) -> None:
    # gpt with attention="manual" (tests/data/workloads/manual_gpt.py): the memory ladder's
    # first step, attention=sdpa, frees the T x T scores saved for backward (about 15% of the
    # worker's peak), fits under 95% of the baseline's peak alone, and trains within the
    # baseline's spread; the ladder stops there. A second real study: about 10 s on an idle
    # 2-core host (a baseline and one candidate worker, the quality reference's sessions),
    # measured 18.7 s at a load average of 7, beside the first test's 22.5 s in the same run.
    config = TuneConfig(
        workload=f"{MANUAL_GPT}:make",
        objective="fit",
        max_memory_fraction=0.95,
        baseline_recipe={"batch_size": 8, "threads": 1},
        budget_s=120,
        trial_timeout_s=60,
        plan=replace(SMALLEST_PLAN),
    )
    result = tune(config=config, out=tmp_path / "run")
    fit = result.fit
    assert fit is not None, result.notes
    story = _story(fit)
    assert not fit.baseline_fits, story
    first = fit.rows[1]
    assert (first.kind, first.change, first.outcome) == ("memory", {"attention": "sdpa"}, "kept")
    assert first.loss_deviation is not None, story  # the quality check measured it
    assert fit.fits and len(fit.rows) == 2, story  # it fits alone: nothing more is tried
    assert result.best_recipe == {"batch_size": 8, "threads": 1, "attention": "sdpa"}
