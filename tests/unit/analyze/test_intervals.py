"""Interval arithmetic on hand-made intervals, and the step breakdown's priority rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from trace_events import op_event, write_trace

from torchdoctor.analyze import analyze_trace
from torchdoctor.analyze import intervals as iv


def _iv(*pairs: tuple[float, float]) -> iv.Intervals:
    return np.array([p[0] for p in pairs], float), np.array([p[1] for p in pairs], float)


def _pairs(x: iv.Intervals) -> list[tuple[float, float]]:
    return list(zip(x[0].tolist(), x[1].tolist(), strict=True))


def test_union_merges_overlapping_nested_and_touching_unsorted() -> None:
    # [5,7] and [0,3] overlap [2,4]; [10,20] holds [12,15]; [20,21] touches [10,20]; [30,31]
    # stands alone. Input unsorted.
    merged = iv.union(*_iv((5, 7), (30, 31), (0, 3), (12, 15), (2, 4), (10, 20), (20, 21)))
    assert _pairs(merged) == [(0, 4), (5, 7), (10, 21), (30, 31)]
    assert iv.length(merged) == 4 + 2 + 11 + 1


def test_union_of_nothing_and_of_one() -> None:
    assert _pairs(iv.union(*iv.empty())) == []
    assert _pairs(iv.union(*_iv((1, 2)))) == [(1, 2)]


def test_intersect_and_overlap() -> None:
    a = _iv((0, 10), (20, 30))
    b = _iv((5, 25), (28, 40))
    assert _pairs(iv.intersect(a, b)) == [(5, 10), (20, 25), (28, 30)]
    assert iv.overlap(a, b) == 5 + 5 + 2
    assert _pairs(iv.intersect(a, _iv((10, 20)))) == []  # touching only: nothing shared
    assert _pairs(iv.intersect(a, iv.empty())) == []


def test_overlap_each_query() -> None:
    covered = _iv((0, 10), (20, 30))
    got = iv.overlap_each(covered, np.array([5.0, 12.0, -5.0, 25.0]), np.array([25, 18, 50, 26.0]))
    assert got.tolist() == [5 + 5, 0, 20, 1]


def test_subtract_and_clip() -> None:
    a = _iv((0, 10), (20, 30))
    assert _pairs(iv.subtract(a, _iv((2, 4), (8, 22), (29, 35)))) == [(0, 2), (4, 8), (22, 29)]
    assert _pairs(iv.subtract(a, iv.empty())) == [(0, 10), (20, 30)]
    assert _pairs(iv.clip(a, 5, 25)) == [(5, 10), (20, 25)]
    assert _pairs(iv.clip(a, 11, 19)) == []


def test_priority_attribution_counts_each_instant_once(tmp_path: Path) -> None:
    """One 100 us step: a kernel 10-30, a runtime call 20-50, an op 0-60, a DataLoader range
    70-90. By priority Kernel takes 10-30 (20), Runtime what is left of 20-50 (30-50: 20),
    DataLoader 70-90 (20), CPU Exec what is left of 0-60 (0-10 and 50-60: 20), Other the
    rest (60-70 and 90-100: 20)."""
    events = [
        op_event("ProfilerStep#1", 0, 100, cat="user_annotation"),
        op_event("aten::mm", 0, 60),
        op_event("cudaLaunchKernel", 20, 30, cat="cuda_runtime", correlation=7),
        op_event("gemm_kernel", 10, 20, cat="kernel", tid=7, correlation=7),
        op_event("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 70, 20,
                 cat="user_annotation"),
    ]  # fmt: skip
    result = analyze_trace(write_trace(tmp_path / "t.json", events))
    assert result.steps is not None and result.steps.count == 1
    assert result.step_breakdown == pytest.approx(
        {
            "Kernel": 20.0,
            "Memcpy": 0.0,
            "Memset": 0.0,
            "Communication": 0.0,
            "Runtime": 20.0,
            "DataLoader": 20.0,
            "CPU Exec": 20.0,
            "Other": 20.0,
        }
    )
