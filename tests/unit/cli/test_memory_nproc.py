"""`torchdoctor memory WORKLOAD --nproc N`: memory per rank under FSDP2, estimated without
materialising the model; its errors as one line before anything runs, its record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchdoctor.api.tools import SHARD_DTYPES
from torchdoctor.cli import main as cli_main
from torchdoctor.core import rundir
from torchdoctor.core.shard_memory import ShardPlan

TINY = ["--param", "layers=2", "--param", "embd=16", "--param", "heads=2"]
TINY += ["--param", "block=8", "--param", "characters=512"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nproc", "0"], "--nproc needs positive integers, got '0'"),
        (["--nproc", "two"], "cannot read --nproc 'two'"),
        (["--nproc", "2", "--batch-sizes", "2,4"], "--batch-sizes cannot be honoured with --nproc"),
        (["--nproc", "2", "--device", "cpu"], "--device cannot be honoured with --nproc"),
        (["--nproc", "2", "--param-dtype", "int8"], "unknown --param-dtype 'int8'"),
        (["--param-dtype", "fp16"], "--param-dtype cannot be honoured without --nproc"),
        (["--nproc", "8", "--max-memory", "lots"], "cannot read memory size 'lots'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert cli_main.main(["memory", "gpt", *args, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()  # refused before anything ran


def test_the_dtypes_refused_early_are_the_ones_the_estimate_knows() -> None:
    from torchdoctor.collect.shard_memory import PARAM_DTYPES

    assert tuple(PARAM_DTYPES) == SHARD_DTYPES


def test_json_says_whether_it_fits_and_the_largest_batch_per_rank(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    args = ["--json", "memory", "gpt", *TINY, "--nproc", "1,4", "--max-memory", "4MiB"]
    assert cli_main.main([*args, "--out", str(run_dir)]) == 0
    plan = ShardPlan.from_json_dict(json.loads(capsys.readouterr().out))
    assert [r.world_size for r in plan.ranks] == [1, 4]
    one, four = plan.ranks
    # the sharded owners shrink with N (to the padding); the activations do not
    assert four.parameters_bytes < one.parameters_bytes
    assert four.optimizer_state_bytes < one.optimizer_state_bytes
    assert plan.max_batch[4] > plan.max_batch[1] >= 1
    for rank in plan.ranks:
        assert rank.batch == plan.max_batch[rank.world_size]
        assert rank.peak_bytes <= 4 * 2**20
    assert ShardPlan.read(run_dir / rundir.SHARD_PLAN) == plan


def test_a_budget_too_small_does_not_fit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["memory", "gpt", *TINY, "--nproc", "2", "--max-memory", "16KiB"]
    assert cli_main.main([*args, "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "Memory per rank (FSDP2)" in out and "does not fit" in out
    # the run folder's reports show the same section, and nothing is missing from them
    md = (tmp_path / "run" / "report.md").read_text()
    assert "## Memory per rank (FSDP2)" in md and "N=2: does not fit in 16.0 KiB" in md
    assert "What is missing" not in md and (tmp_path / "run" / "report.html").is_file()
