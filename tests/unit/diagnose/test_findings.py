import math

import pytest

from torchdoctor.diagnose.findings import amdahl_bound, severity_for_share


def test_amdahl_limit_and_assumed_speedup() -> None:
    assert amdahl_bound(0.5) == pytest.approx(2.0)
    assert amdahl_bound(0.5, 2.0) == pytest.approx(1 / (1 - 0.5 * 0.5))
    assert amdahl_bound(0.0) == 1.0
    assert math.isinf(amdahl_bound(1.0))


def test_severity_boundaries() -> None:
    assert severity_for_share(0.25) == "high"
    assert severity_for_share(0.2499) == "medium"
    assert severity_for_share(0.10) == "medium"
    assert severity_for_share(0.0999) == "low"
    assert severity_for_share(0.0299) == "info"
