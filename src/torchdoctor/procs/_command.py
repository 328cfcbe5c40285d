"""A short system command run to its end (iproute2's `ip`, `tc`): its exit code and output.

Not a job: no deadline, no memory cap, nothing to drive; the one place such a command is
started, so that every process the project starts is started in `procs/`.
"""

from __future__ import annotations

import subprocess


def run_command(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run `args` (no shell) to its end; its exit code and its output, captured as text."""
    return subprocess.run(args, capture_output=True, text=True, check=False)
