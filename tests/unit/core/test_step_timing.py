from __future__ import annotations

import pytest

from torchdoctor.core.steps import PHASES, StepTiming


def test_fractions_cover_every_phase_and_sum_to_one() -> None:
    step = StepTiming(
        index=0,
        total_s=2.0,
        phases={"data_wait": 0.5, "forward": 0.5, "backward": 0.75, "other": 0.25},
        loss=1.0,
    )
    fr = step.fractions()
    assert tuple(fr) == PHASES
    assert fr["data_wait"] == pytest.approx(0.25)
    assert sum(fr.values()) == pytest.approx(1.0)


def test_unknown_phase_is_rejected() -> None:
    with pytest.raises(Exception, match="phases"):
        StepTiming(index=0, total_s=1.0, phases={"dataload": 1.0})  # type: ignore[dict-item]
