"""Command modules load lazily: `torchdoctor analyze` imports analyze's module only (checked in
a fresh interpreter, whose sys.modules holds only what the command loaded)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Modules the analyze path must not load: other stages and their heavy dependencies.
HEAVY = ("torch", "scipy", "optuna", "matplotlib", "jinja2")
OTHER_STAGES = ("torchdoctor.tune", "torchdoctor.diagnose", "torchdoctor.report")


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
    # The shared options (one vocabulary) are no command: they cost only what typer costs.
    shared = {"torchdoctor.cli.main", "torchdoctor.cli.state", "torchdoctor.cli.options"}
    assert commands == {"torchdoctor.cli.analyze", *shared}
    loaded = [m for m in modules if m.split(".")[0] in HEAVY or m.startswith(OTHER_STAGES)]
    assert loaded == []
