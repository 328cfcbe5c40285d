"""A real CPU hog beside `torchdoctor bench`: the measurement says the machine was disturbed.

bench runs in a subprocess, so it reads the real machine (the tests' quiet fake, in
conftest, applies only in this process). The hogs are bounded busy loops, one per core.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

SRC: Final = Path(__file__).resolve().parents[2] / "src"
#: Longest a hog runs: past bench's budget and start-up, bounded if the test dies early.
HOG_S: Final = 25.0
HOG = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"


@pytest.fixture
def cpu_hogs() -> Iterator[list[subprocess.Popen[bytes]]]:
    hogs = [
        subprocess.Popen([sys.executable, "-c", HOG.format(s=HOG_S)])
        for _ in range(os.cpu_count() or 1)
    ]
    try:
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _bench(*args: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "--json", "bench", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data: dict[str, object] = json.loads(done.stdout)
    return data


@pytest.mark.timeout(180)
def test_bench_beside_a_cpu_hog_warns_that_the_machine_was_disturbed(
    cpu_hogs: list[subprocess.Popen[bytes]],
) -> None:
    data = _bench("x @ x", "--setup", "x = torch.ones(128, 128)", "--budget", "2")
    load = data["machine_load"]
    assert isinstance(load, dict)
    assert load["disturbed"] is True
    assert load["other_cores"] > 0.5 and load["cores"] >= 1
    warnings = data["warnings"]
    assert isinstance(warnings, list)
    assert any("machine disturbed" in w and "other processes used" in w for w in warnings)
