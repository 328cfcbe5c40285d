"""The requests after which a compilation pays for itself, from two latency samples."""

from __future__ import annotations

import numpy as np
import pytest

from torchdoctor.core.errors import MeasureError
from torchdoctor.serve.payback import BreakEven, break_even_requests


def test_constant_latencies_give_an_exact_break_even() -> None:
    # 10 ms eager, 6 ms compiled: 4 ms saved a request pays 2 s of compilation in 500.
    result = break_even_requests(2.0, [0.010] * 30, [0.006] * 30)
    assert result.requests == pytest.approx(500.0)
    assert result.requests_low == pytest.approx(500.0)
    assert result.requests_high == pytest.approx(500.0)
    assert result.pays_off


def test_noisy_latencies_give_an_interval_around_the_point() -> None:
    rng = np.random.default_rng(0)
    eager = list(0.010 + rng.normal(0, 0.0005, 200))
    compiled = list(0.006 + rng.normal(0, 0.0005, 200))
    result = break_even_requests(2.0, eager, compiled)
    assert result.requests is not None
    assert result.requests_low is not None and result.requests_high is not None
    assert result.requests_low < result.requests < result.requests_high
    assert 400 < result.requests < 600
    assert BreakEven.from_json_dict(result.to_json_dict()) == result


def test_a_variant_no_faster_never_pays() -> None:
    result = break_even_requests(2.0, [0.006] * 30, [0.010] * 30)
    assert result.requests is None and result.requests_high is None
    assert not result.pays_off


def test_a_saving_whose_interval_reaches_zero_has_no_upper_bound() -> None:
    rng = np.random.default_rng(1)
    eager = list(0.0101 + rng.normal(0, 0.002, 40))
    compiled = list(0.0100 + rng.normal(0, 0.002, 40))
    result = break_even_requests(1.0, eager, compiled)
    assert result.saving_low_s <= 0 < result.saving_high_s
    assert result.requests_high is None and result.requests_low is not None


def test_a_negative_setup_time_is_refused() -> None:
    with pytest.raises(MeasureError, match="setup time"):
        break_even_requests(-1.0, [0.01] * 5, [0.005] * 5)
