"""Command modules load lazily: `torchdoctor analyze` imports analyze's module only, while
`--help` still lists every command in the documented order (COMMAND_MODULES)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchdoctor.cli import main as cli_main

# Modules the analyze path must not load: other stages and their heavy dependencies.
HEAVY = ("torch", "scipy", "optuna", "matplotlib", "jinja2")
OTHER_STAGES = ("torchdoctor.tune", "torchdoctor.diagnose", "torchdoctor.report")


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


def _trace(tmp_path: Path) -> Path:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": i, "dur": 1}
        for i in range(0, 20, 2)
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_analyze_imports_only_its_own_command(tmp_path: Path) -> None:
    code = (
        "import sys, json\n"
        "from torchdoctor.cli.main import main\n"
        "with open('/dev/null', 'w') as sink:\n"
        "    out, sys.stdout = sys.stdout, sink\n"
        f"    rc = main(['--json', 'analyze', {str(_trace(tmp_path))!r}, '--no-report'])\n"
        "    sys.stdout = out\n"
        "print(json.dumps([rc, sorted(sys.modules)]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rc, modules = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rc == 0
    commands = {m for m in modules if m.startswith("torchdoctor.cli.")}
    assert commands == {"torchdoctor.cli.analyze", "torchdoctor.cli.main", "torchdoctor.cli.state"}
    loaded = [m for m in modules if m.split(".")[0] in HEAVY or m.startswith(OTHER_STAGES)]
    assert loaded == []


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
