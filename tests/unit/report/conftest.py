"""Fixtures for the report tests: sample run folders built from records."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The sample records live next to the tests; make them importable under any import mode.
sys.path.insert(0, str(Path(__file__).parent))
from report_samples import make_run


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A complete demo run folder with every record."""
    return make_run(tmp_path)


@pytest.fixture
def killed_run_dir(tmp_path: Path) -> Path:
    """What a demo killed after its first records leaves: run.json still says running."""
    return make_run(tmp_path, complete=False)
