"""The alpha-beta fit and bus bandwidth, on timings made from known parameters."""

from __future__ import annotations

import numpy as np
import pytest

from torchdoctor.core.errors import MeasureError
from torchdoctor.scale.fit import (
    bus_bandwidth,
    bus_factor,
    fit_alpha_beta,
    fit_near,
    sizes_near,
)

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


def test_sizes_near_bracket_the_targets_and_widen_to_larger_sizes() -> None:
    sizes = [1024 * 4**k for k in range(7)]  # 1 KiB .. 4 MiB
    # mlp's one 603 KB bucket: 256 KiB and 1 MiB bracket it, 4 MiB makes the third point
    assert sizes_near(sizes, [603_176]) == [256 * 1024, 1024**2, 4 * 1024**2]
    # two buckets spanning 1.2 to 1.6 MB: 1 MiB to 4 MiB, then one smaller size
    assert sizes_near(sizes, [1_186_856, 1_619_008]) == [256 * 1024, 1024**2, 4 * 1024**2]
    # past the largest size measured: the largest sizes; below the smallest: the smallest
    assert sizes_near(sizes, [64 * 1024**2]) == sizes[-3:]
    assert sizes_near(sizes, [100]) == sizes[:3]
    # buckets spanning the whole range keep every size
    assert sizes_near(sizes, [1024, 4 * 1024**2]) == sizes


def test_the_fit_near_a_bucket_sees_the_sustained_rate_a_token_bucket_hides() -> None:
    # A tbf link at 400 Mbit/s: the first `burst` bytes of a collective pass at the line rate
    # (netns.py's bucket, 0.25 ms of the rate), the rest at the shaped rate, with TCP's payload
    # 1448 of every 1514 bytes tbf counts.
    rate, burst, alpha = 50e6 * 1448 / 1514, 12_500, 400e-6
    sizes = [1024 * 4**k for k in range(7)]
    times = [alpha + max(0, s - burst) / rate for s in sizes]
    bucket = 603_176
    truth = alpha + (bucket - burst) / rate
    everything = fit_alpha_beta("all_reduce", 2, sizes, times)
    near = fit_near("all_reduce", 2, sizes, times, [bucket])
    assert everything.busbw > 1.05 * rate  # the small sizes make the whole-range fit optimistic
    assert everything.predict(bucket) < 0.95 * truth
    assert near.predict(bucket) == pytest.approx(truth, rel=0.02)
    assert near.busbw == pytest.approx(rate, rel=0.02)
    assert near.sizes_fitted == (256 * 1024, 4 * 1024**2)
    assert everything.sizes_fitted == (1024, 4 * 1024**2)
