"""Reading what the CLI printed, for tests."""

from __future__ import annotations


def one_error_line(err: str) -> str:
    """The single non-empty line of `err` (bad input is one line); fails the test otherwise."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]
