"""Child-process entry: `python -m torchdoctor.collect._child CONFIG -- TARGET [ARGS...]`.

Dies with its launcher (collect/_lifeline.py), installs the instrumentation, runs the target
script or module as `__main__`, writes the `ScriptProfile`, and exits with the script's own
exit code.
"""

from __future__ import annotations

import sys

from torchdoctor.collect._lifeline import die_with_parent
from torchdoctor.collect._target import LaunchConfig, run_target


def main(argv: list[str]) -> int:
    die_with_parent()  # a launcher killed outright takes its script along
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m torchdoctor.collect._child CONFIG -- TARGET [ARGS...]")
        return 2
    return run_target(LaunchConfig.read(argv[0]), argv[2:])


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
