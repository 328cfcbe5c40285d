"""Fixtures of the tests that call the CLI's `main` in this process."""

from __future__ import annotations

import pytest

from torchdoctor.cli.state import settings


@pytest.fixture(autouse=True)
def _reset_cli_settings() -> None:
    """`--json`/`--debug` set by one test's `main([...])` call must not leak into the next."""
    settings.json = False
    settings.debug = False
