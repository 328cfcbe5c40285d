"""The alpha-beta fit and bus bandwidth, on timings made from known parameters."""

from __future__ import annotations

import numpy as np
import pytest

from torchdoctor.core.errors import MeasureError
from torchdoctor.scale.fit import bus_bandwidth, bus_factor, fit_alpha_beta

SIZES = [2**k for k in range(10, 27, 2)]  # 1 KiB .. 64 MiB


def test_bus_factors_follow_nccl_tests() -> None:
    assert bus_factor("all_reduce", 2) == pytest.approx(1.0)
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_gather", 4) == pytest.approx(0.75)
    assert bus_factor("reduce_broadcast", 4) == pytest.approx(2.0)
    assert bus_factor("all_reduce", 1) == 0.0


def test_bus_bandwidth_is_algbw_times_factor() -> None:
    # 1 MB in 1 ms: algbw 1 GB/s; all-reduce over 4 ranks moves 1.5x that over each link
    assert bus_bandwidth("all_reduce", 4, 1e6, 1e-3) == pytest.approx(1.5e9)
    with pytest.raises(MeasureError):
        bus_bandwidth("all_reduce", 4, 1e6, 0.0)


def test_fit_recovers_exact_parameters() -> None:
    alpha, beta = 50e-6, 1 / 2e9
    times = [alpha + beta * s for s in SIZES]
    fit = fit_alpha_beta("all_reduce", 2, SIZES, times)
    assert fit.alpha_s == pytest.approx(alpha, rel=1e-6)
    assert fit.beta_s_per_byte == pytest.approx(beta, rel=1e-6)
    assert fit.rel_rms_residual == pytest.approx(0.0, abs=1e-9)
    assert fit.busbw == pytest.approx(2e9, rel=1e-6)  # factor 1 at N=2


def test_noisy_fit_reports_its_error_and_covers_the_truth() -> None:
    rng = np.random.default_rng(0)
    alpha, beta = 80e-6, 1 / 1e9
    times = [(alpha + beta * s) * float(rng.lognormal(0.0, 0.05)) for s in SIZES for _ in range(3)]
    sizes = [s for s in SIZES for _ in range(3)]
    fit = fit_alpha_beta("all_gather", 4, sizes, times)
    assert 0.02 < fit.rel_rms_residual < 0.1
    assert abs(fit.alpha_s - alpha) < 4 * fit.alpha_se
    assert abs(fit.beta_s_per_byte - beta) < 4 * fit.beta_se
    # the relative weighting keeps the latency right although the big sizes dominate in time
    assert fit.alpha_s == pytest.approx(alpha, rel=0.2)
    assert fit.predict_se(1e6) > 0


def test_fit_refuses_too_few_points() -> None:
    with pytest.raises(MeasureError):
        fit_alpha_beta("all_reduce", 2, [1024, 2048], [1e-5, 2e-5])
    with pytest.raises(MeasureError):
        fit_alpha_beta("all_reduce", 2, [1024] * 4, [1e-5] * 4)
