"""`torchdoctor diagnose -- python tests/zoo/<script>.py` names each planted bottleneck.

Each zoo script is diagnosed once, end to end through the CLI in its own process, all of them
side by side (module-scoped fixture), and every assertion reads those results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

#: Seven scripts diagnosed end to end, each in its own CLI process: minutes on 2 cores (the
#: first diagnosis of a session also measures the machine's ceilings).
pytestmark = pytest.mark.study

ZOO = Path(__file__).resolve().parents[1] / "zoo"

#: Steps the manual-SGD script runs: its step count is checked against this.
MANUAL_SGD_STEPS = 13

# (script, its arguments, planted primary_bottleneck) as tests/zoo/README.md lists them.
CASES = [
    ("data_loading_argparse.py", [], "data_loading"),
    ("host_sync_config.py", [], "host_sync"),
    ("framework_overhead_manual_sgd.py", [str(MANUAL_SGD_STEPS)], "framework_overhead"),
    ("optimizer_trainer.py", [], "optimizer"),
    ("other_host_prebatched.py", [], "other_host"),
    ("compute_workers.py", [], "compute"),
    ("control_well_tuned.py", [], "compute"),
]


@dataclass(frozen=True)
class ZooRun:
    code: int
    stderr: str
    run_dir: Path

    @property
    def diagnosis(self) -> dict:
        assert self.code == 0, self.stderr[-2000:]
        return json.loads((self.run_dir / "diagnosis.json").read_text())


def _diagnose(script: str, args: list[str], out: Path) -> ZooRun:
    command = [
        sys.executable,
        "-m",
        "torchdoctor",
        "--json",
        "diagnose",
        "--warmup",
        "3",
        "--profile-steps",
        "3",
        "--out",
        str(out),
        "--",
        sys.executable,
        str(ZOO / script),
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    return ZooRun(done.returncode, done.stderr, out)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ZooRun]:
    """Every zoo script diagnosed, as many at once as there are cores."""
    root = tmp_path_factory.mktemp("zoo")
    # The machine's ceilings, measured here once and cached for the session (tests' cache
    # folder, conftest): the scripts' diagnoses read them from the cache. Measured by the
    # first of seven side-by-side processes instead, each would see the others' load, find
    # its figures disturbed, cache nothing and measure again (~30 s each).
    from torchdoctor.measure import get_ceilings

    get_ceilings(device="cpu")
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {s: pool.submit(_diagnose, s, a, root / Path(s).stem) for s, a, _ in CASES}
        return {s: f.result() for s, f in futures.items()}


@pytest.mark.parametrize(("script", "planted"), [(s, p) for s, _, p in CASES])
def test_zoo_primary_bottleneck(script: str, planted: str, zoo: dict[str, ZooRun]) -> None:
    run = zoo[script]
    d = run.diagnosis
    assert (run.run_dir / "profile.json").is_file()
    assert d["primary_bottleneck"] == planted, (d["bottleneck_shares"], d["phase_fractions"])


def test_control_has_no_high_severity_finding(zoo: dict[str, ZooRun]) -> None:
    d = zoo["control_well_tuned.py"].diagnosis
    assert not [f["rule_id"] for f in d["findings"] if f["severity"] == "high"], d["findings"]


def test_planted_rules_fire_with_their_evidence(zoo: dict[str, ZooRun]) -> None:
    """The finding behind each planting is there, with the numbers that name it."""
    sync = zoo["host_sync_config.py"].diagnosis
    f = next(f for f in sync["findings"] if f["rule_id"] == "host_sync")
    assert f["severity"] == "high" and f["evidence"]["syncs_per_step"] >= 8
    assert f["evidence"]["sync_time_share"] >= 0.5
    data = zoo["data_loading_argparse.py"].diagnosis
    f = next(f for f in data["findings"] if f["rule_id"] == "dataloader_wait")
    assert f["prescription"]["knobs"].get("num_workers", 0) >= 1
    fw = zoo["framework_overhead_manual_sgd.py"].diagnosis
    assert any(x["rule_id"] == "framework_overhead" for x in fw["findings"]), fw["findings"]


def test_manual_sgd_step_count(zoo: dict[str, ZooRun]) -> None:
    """No torch.optim: steps are found from backward calls, and every one is counted."""
    d = zoo["framework_overhead_manual_sgd.py"].diagnosis
    assert d["step_count"] == MANUAL_SGD_STEPS
    run_dir = zoo["framework_overhead_manual_sgd.py"].run_dir
    profile = json.loads((run_dir / "profile.json").read_text())
    assert profile["step_detection"] == "backward"


def test_a_scripts_step_memory_is_split_into_its_owners(zoo: dict[str, ZooRun]) -> None:
    """Memory to its owners for an unmodified script: its optimizer and model found by the
    injection's hooks, one warm-up step split, in memory.json and the report's memory section
    as a workload's is (no fit: one batch, the script's own)."""
    run = zoo["optimizer_trainer.py"]
    assert run.diagnosis
    plan = json.loads((run.run_dir / "memory.json").read_text())
    assert plan["peak_fit"] is None
    (step,) = plan["steps"]
    # The zoo's 64,000 x 64 embedding and a Linear(64, 1), in fp32, under a for-loop Adam.
    weights = (64_000 * 64 + 64 + 1) * 4
    assert step["parameters_bytes"] == weights and step["gradients_bytes"] == weights
    assert step["optimizer_state_bytes"] >= 2 * weights
    assert step["batch_size"] == 8  # its forward's first input (it batches by hand)
    owners = ("parameters", "gradients_at_peak", "optimizer_state", "activations_at_peak")
    held = sum(step[f"{o}_bytes"] for o in owners) + step["temporaries_bytes"]
    assert held == step["peak_bytes"]
    report = (run.run_dir / "report.md").read_text()
    assert "## Memory to its owners" in report
    # A script without torch.optim: no parameters to find, so no memory.json, and no error.
    assert not (zoo["framework_overhead_manual_sgd.py"].run_dir / "memory.json").exists()
