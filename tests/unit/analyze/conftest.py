"""Shared fixtures: the real traces beside the repository clone (../shared/traces)."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_TRACES = Path(__file__).parents[3] / ".." / "shared" / "traces"


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not found at {SHARED_TRACES.resolve()} (../shared/traces)")
    return SHARED_TRACES
