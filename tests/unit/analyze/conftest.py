"""Shared fixtures: the real traces kept with the tests (tests/data/traces, licences beside)."""

from __future__ import annotations

from pathlib import Path

import pytest

REAL_TRACES = Path(__file__).parents[2] / "data" / "traces"


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    return REAL_TRACES
