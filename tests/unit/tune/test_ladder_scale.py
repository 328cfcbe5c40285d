"""The ladder's numbers agree with each other: every row on the baseline's scale, beside both
arms of the A/B that decided it; and a study's own notes lead the result's (simulated
sessions: one tune, in process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.tune import Tuner, TuneResult, tune
from tune_sim import FAST_KNOB, NOOP_KNOB, sim_config

#: What a watcher of the study was told: (event, detail), in order.
EVENTS: list[tuple[str, object]] = []


def _watch(tuner: Tuner, planned: int) -> None:
    EVENTS.append(("order", list(tuner.planned_order)))
    tuner.on_begin = lambda change: EVENTS.append(("begin", dict(change)))
    tuner.on_look = lambda est, rounds: EVENTS.append(("look", rounds))


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> TuneResult:
    config = sim_config(
        [FAST_KNOB, NOOP_KNOB], noise=0.01, effects={"fast": {"True": 0.5}}
    ).model_copy(update={"notes": ["demo --quick: what it costs"], "search_batch": False})
    EVENTS.clear()
    return tune(config=config, out=Path(tmp_path_factory.mktemp("t")) / "run", on_start=_watch)


def test_a_watcher_hears_the_order_each_trial_start_and_each_look(result: TuneResult) -> None:
    assert EVENTS[0] == ("order", ["fast", "noop"])
    begins = [detail for event, detail in EVENTS if event == "begin"]
    assert begins[:2] == [{"fast": True}, {"noop": True}]
    # Looks come between a trial's start and the next one's, each after the first look's rounds.
    first_looks = EVENTS.index(("begin", {"fast": True})) + 1
    assert EVENTS[first_looks][0] == "look" and EVENTS[first_looks][1] == 6


def test_kept_rows_read_on_the_baseline_scale_beside_their_pair(result: TuneResult) -> None:
    base, kept = result.ladder.rungs[0], result.ladder.rungs[1]
    assert kept.change == {"fast": True}
    assert base.scaled_samples_per_s == base.samples_per_s
    assert kept.scaled_samples_per_s == pytest.approx(base.samples_per_s * kept.speedup_vs_baseline)
    # Both arms of the A/B that kept it: the previous best's rate and the change's.
    assert kept.best_samples_per_s is not None
    assert kept.samples_per_s / kept.best_samples_per_s == pytest.approx(
        kept.speedup_vs_previous, rel=0.05
    )


def test_rejected_rows_read_on_the_same_scale(result: TuneResult) -> None:
    (rejected,) = result.ladder.rejected
    assert rejected.change == {"noop": True}
    best = result.ladder.rungs[-1]
    assert rejected.speedup_vs_best is not None
    assert rejected.scaled_samples_per_s == pytest.approx(
        best.scaled_samples_per_s * rejected.speedup_vs_best
    )
    assert rejected.samples_per_s is not None and rejected.best_samples_per_s is not None


def test_a_studys_own_notes_lead_the_results_notes(result: TuneResult) -> None:
    assert result.notes[0] == "demo --quick: what it costs"
    assert any(n.startswith("speedup from") for n in result.notes[1:])
