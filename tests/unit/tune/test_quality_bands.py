"""The band each safety class is held to is the one shown, with the bound that set it.

The reference is the built-in mlp's on an H200 (tests/data/h200/tune_mlp.json): 7 runs whose
late loss averaged 1.45 with a standard deviation of 0.00044. The note then said "lands within
1.45..1.45" while bf16, tf32 and compile were judged by a 5% floor it never showed.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from torchdoctor.report.adapters.tune import ladder_section
from torchdoctor.tune.parity import (
    CLOSE_TOLERANCE,
    QualityReference,
    check_parity,
    quality_bands,
    quality_notes,
)
from torchdoctor.tune.records import TuneResult

H200_TUNE = Path(__file__).parents[2] / "data" / "h200" / "tune_mlp.json"
STEPS = 32  # the window 16..31, as the H200 note says


def _h200_reference() -> QualityReference:
    # Seven late means with the record's mean and spread: +-d around 1.45, symmetric.
    mean, sd = 1.45, 0.00044
    offsets = [-3, -2, -1, 0, 1, 2, 3]
    scale = sd / statistics.stdev(offsets)
    return QualityReference(tuple(mean + o * scale for o in offsets), 2.3, (16, 32))


def _flat(value: float) -> list[float | None]:
    return [2.3] * 16 + [value] * 16


def test_the_record_said_what_the_model_reference_does() -> None:
    record = json.loads(H200_TUNE.read_text())
    said = " ".join(record["notes"])
    assert "averaged a loss of 1.45" in said and "sd 0.00044" in said
    ref = _h200_reference()
    assert ref.mean == pytest.approx(1.45) and ref.spread == pytest.approx(0.00044)


def test_close_and_semantic_bands_are_set_by_the_floor_on_a_quiet_gpu() -> None:
    bands = {b.safety: b for b in quality_bands(_h200_reference())}
    close = bands["close"]
    assert close.set_by == "floor"
    assert close.low == pytest.approx(1.45 * (1 - CLOSE_TOLERANCE))
    assert close.high == pytest.approx(1.45 * (1 + CLOSE_TOLERANCE))
    assert close.statistic_half < close.floor_half
    assert bands["semantic"].low is None and bands["semantic"].set_by == "floor"
    # The reference runs' spread is wider than the exact floor of 0.1%: the statistic decides.
    assert bands["exact"].set_by == "statistic"


@pytest.mark.parametrize("safety", ["exact", "close", "semantic"])
def test_the_band_shown_is_the_band_applied(safety: str) -> None:
    ref = _h200_reference()
    band = next(b for b in quality_bands(ref) if b.safety == safety)
    inside = band.high - 1e-6
    outside = band.high + 1e-6
    assert check_parity(ref, _flat(inside), safety).passed  # type: ignore[arg-type]
    assert not check_parity(ref, _flat(outside), safety).passed  # type: ignore[arg-type]
    if band.low is not None:
        assert not check_parity(ref, _flat(band.low - 1e-6), safety).passed  # type: ignore[arg-type]


def test_the_notes_show_each_class_band_and_its_bound() -> None:
    notes = quality_notes(_h200_reference())
    applied = next(n for n in notes if n.startswith("quality bands applied"))
    assert "close 1.377..1.522, set by the class floor of 0.05 of the mean" in applied
    assert "semantic at most 1.522" in applied
    assert "exact" in applied and "set by the statistic" in applied


def test_the_report_shows_the_bands_of_tune_json() -> None:
    record = json.loads(H200_TUNE.read_text())
    record["quality_bands"] = [b.model_dump() for b in quality_bands(_h200_reference())]
    facts = {f.label: f.value for f in ladder_section(record).facts}
    assert facts["quality band (close)"].startswith("1.377..1.522 (set by the floor")
    assert facts["quality band (semantic)"].startswith("at most 1.522")


def test_a_tune_json_written_before_the_bands_still_reads() -> None:
    result = TuneResult.read(H200_TUNE)
    assert result.quality_bands == []
