"""`launches.percentiles` is np.percentile's default method, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from torchdoctor.analyze.launches import percentiles


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 99, 100, 101, 1234])
@pytest.mark.parametrize("scale", [1.0, 1e6])
def test_percentiles_equal_numpy(n: int, scale: float) -> None:
    values = np.random.default_rng(n).standard_normal(n) * scale
    ps = [0, 1, 50, 90, 99, 99.9, 100]
    np.testing.assert_array_equal(percentiles(values, ps), np.percentile(values, ps))


def test_percentiles_of_ties_and_the_input_left_unsorted() -> None:
    values = np.array([5.0, 1.0, 5.0, 5.0, 3.0])
    assert percentiles(values, [50, 90]).tolist() == [5.0, 5.0]
    assert values.tolist() == [5.0, 1.0, 5.0, 5.0, 3.0]
