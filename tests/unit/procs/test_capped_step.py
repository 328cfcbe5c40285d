"""A training step under the CPU's real memory cap (procs/_capped.py's child side), run in a
fresh interpreter: it fits a generous budget and runs out of memory under none at all."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: An mlp whose weights and activations (256 wide, batch 512: 256 KiB and 512 KiB) are over
#: glibc's fixed mmap threshold, so each is a mapping the cap counts; two budgets in one
#: interpreter (one torch import): 1 GiB, and 0 (the step may add nothing to the data size).
_STEPS = """
import json
from torchdoctor.procs._capped import capped_step
params = {"features": 256, "hidden": 256, "layers": 1, "rows": 1024}
for budget in (2**30, 0):
    step = capped_step(
        workload="mlp", params=params, recipe={}, batch=512, budget_bytes=budget, seed=0
    )
    print(json.dumps(step.model_dump()))
"""


@pytest.mark.study  # a fresh interpreter imports torch and dynamo: ~4.5 s of CPU
@pytest.mark.untimed  # what fits under a cap, no timing
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA: Linux's")
def test_a_capped_step_fits_a_generous_budget_and_runs_out_under_none() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _STEPS], capture_output=True, text=True, timeout=120, check=True
    )
    generous, none = (json.loads(line) for line in done.stdout.splitlines()[-2:])
    assert generous["outcome"] == "fits" and generous["reason"] == ""
    assert none["outcome"] == "oom" and "allocate" in none["reason"]
    # The cap is the data size after the warm-up less the resident tensors plus the budget;
    # the resident tensors hold at least the two 256x256 fp32 weights.
    assert none["resident_bytes"] >= 2 * 256 * 256 * 4
    assert none["limit_bytes"] == none["data_base_bytes"] - none["resident_bytes"]
    base = generous["data_base_bytes"] - generous["resident_bytes"]
    assert generous["limit_bytes"] == base + 2**30
