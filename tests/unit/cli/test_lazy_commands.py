"""Command modules load lazily: the command named on the line is found without loading the
others, and `--help` still lists every command in the documented order (COMMAND_MODULES).
What a command imports is checked in a fresh interpreter (tests/integration/)."""

from __future__ import annotations

import re

import pytest

from torchdoctor.cli import main as cli_main


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["analyze", "t.json"], "analyze"),
        (["--json", "--debug", "analyze", "t.json"], "analyze"),
        (["--json", "tune", "mlp"], "tune"),
        (["analyze", "--help"], "analyze"),
        ([], None),
        (["--help"], None),
        (["--version"], None),
        (["--json"], None),
        (["no-such-command"], None),
        (["--json", "--top", "analyze"], None),  # an option the group does not know
    ],
)
def test_command_named(argv: list[str], expected: str | None) -> None:
    assert cli_main._command_named(argv) == expected


def test_help_lists_every_command_in_documented_order(capsys: pytest.CaptureFixture[str]) -> None:
    # Run a single command first, as a test session or a script would: --help must still
    # list all commands, in order, not just the one already loaded.
    assert cli_main.main(["analyze", "--help"]) == 0
    capsys.readouterr()
    assert cli_main.main(["--help"]) == 0
    out = capsys.readouterr().out
    listed = re.findall(r"^│ (\w+)\s{2,}", out, flags=re.MULTILINE)
    assert listed == [name for name in cli_main.COMMAND_MODULES if name in listed]
    assert set(listed) == set(cli_main.COMMAND_MODULES)
