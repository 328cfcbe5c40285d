"""`torchdoctor memory`: its help, its errors as one line, its record and report section."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from torchdoctor.cli import main as cli_main
from torchdoctor.core import rundir
from torchdoctor.core.memory_owners import MemoryPlan
from torchdoctor.report.adapters.memory import memory_blocks

sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
from golden_cases import render_forms

TINY = ["--param", "features=8", "--param", "hidden=16", "--param", "layers=1"]
TINY += ["--param", "rows=64", "--device", "cpu"]


def test_help_teaches_the_budget_and_the_fit(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["memory", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--max-memory" in out and "--batch-sizes" in out
    assert "fixed + per_sample * batch" in out and "Example:" in out
    assert "--check-edge" in out and "RLIMIT_DATA" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-memory", "lots"], "cannot read memory size 'lots'"),
        (["--batch-sizes", "8"], "cannot read batch sizes '8'"),
        (["--batch-sizes", "0,4"], "cannot read batch sizes '0,4'"),
        (["--set", "batch_size=64"], "memory sets the batch size itself"),
        (["--check-edge"], "--check-edge needs a budget to cap the probes at"),
        (["--max-memory", "1MiB", "--check-edge", "--device", "cuda"], "--check-edge caps host"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert cli_main.main(["memory", "mlp", *args, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()  # refused before anything ran


def test_a_script_takes_no_budget_nor_batches(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # `memory -- python train.py`: the script's batch and recipe are its own (one step split,
    # no fit), refused before the script starts.
    args = ["memory", "--max-memory", "1GiB", "--out", str(tmp_path / "run")]
    assert cli_main.main([*args, "--", "python", "train.py"]) == 2
    err = capsys.readouterr().err.strip()
    assert "a script's batch and recipe are its own" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_budget_below_the_fixed_memory_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["memory", "mlp", *TINY, "--batch-sizes", "2,4", "--max-memory", "1KiB"]
    assert cli_main.main([*args, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "fits no batch" in err and "before its first sample" in err
    assert len(err.splitlines()) == 1


def test_json_is_the_plan_and_the_report_shows_its_owners(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    args = ["--json", "memory", "mlp", *TINY, "--batch-sizes", "2,4,8", "--max-memory", "1MiB"]
    assert cli_main.main([*args, "--out", str(run_dir)]) == 0
    plan = MemoryPlan.from_json_dict(json.loads(capsys.readouterr().out))
    assert [s.batch_size for s in plan.steps] == [2, 4, 8]
    assert plan.max_batch is not None and plan.footprint_at(plan.max_batch) <= 2**20
    assert plan.footprint_at(plan.max_batch + 1) > 2**20
    assert MemoryPlan.read(run_dir / rundir.MEMORY) == plan
    md = render_forms(run_dir, tmp_path)["md"]
    assert "## Memory to its owners, at each step's peak" in md
    assert "| batch | parameters | gradients | optimizer state | activations |" in md
    assert f"| largest batch that fits | {plan.max_batch} under 1.0 MiB |" in md
    assert "measured out-of-memory edge" not in md  # not asked for (--check-edge)


def test_the_report_shows_a_checked_edge_beside_the_prediction() -> None:
    plan = {
        "workload": "mlp",
        "device": "cpu",
        "steps": [],
        "max_batch": 105,
        "budget_bytes": 2**20,
        "oom_edge": {
            "budget_bytes": 2**20,
            "edge": 100,
            "first_over": 101,
            "high": 210,
            "mechanism": "rlimit_data",
            "probes": [{"batch": 210, "budget_bytes": 2**20, "outcome": "oom"}],
        },
    }
    facts = {fact.label: fact.value for fact in memory_blocks(plan).facts}
    assert facts["measured out-of-memory edge"] == (
        "100 (batch 101 ran out of memory); predicted/measured 1.05 "
        "(the CPU's data size capped (RLIMIT_DATA); 1 probes)"
    )
    plan["oom_edge"]["edge"] = 210  # the search's top fitted: a bound, not an edge
    facts = {fact.label: fact.value for fact in memory_blocks(plan).facts}
    assert facts["measured out-of-memory edge"].startswith("at least 210, the search's top")


def test_diagnose_memory_is_refused_for_a_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["diagnose", "--memory", "--", "python", "train.py"]) == 2
    assert "--memory applies to a workload only" in capsys.readouterr().err


def test_diagnose_memory_writes_the_owners_beside_the_diagnosis(tmp_path: Path) -> None:
    from torchdoctor.cli.diagnose import memory_beside

    plan = memory_beside("mlp", {"batch_size": "4", "set_to_none": "true"}, "cpu", tmp_path)
    assert [s.batch_size for s in plan.steps] == [2, 4]
    assert MemoryPlan.read(tmp_path / rundir.MEMORY) == plan
