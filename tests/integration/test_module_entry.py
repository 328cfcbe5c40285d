"""`python -m torchdoctor` runs the CLI (in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys

from torchdoctor import __version__


def test_module_entry_point_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "--version"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"torchdoctor {__version__}"
