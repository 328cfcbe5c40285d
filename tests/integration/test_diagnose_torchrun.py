"""`torchdoctor diagnose --json -- torchrun --nproc_per_node 2 ...` on a real 2-rank gloo DDP
job (tests/zoo/ddp_straggler.py): one JSON document, the job's, blaming the planted
straggler and its cause. A study: it starts torchrun and two training processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchdoctor.cli.main import main

ZOO = Path(__file__).resolve().parents[1] / "zoo" / "ddp_straggler.py"


@pytest.mark.study
def test_torchrun_job_is_one_document_blaming_rank_1s_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--json", "diagnose", "--out", str(tmp_path / "run")]
    argv += ["--warmup", "2", "--profile-steps", "3", "--steps", "6", "--"]
    argv += ["torchrun", "--standalone", "--nproc_per_node", "2", str(ZOO), "--steps", "6"]
    assert main(argv) == 0
    job = json.loads(capsys.readouterr().out)  # one document, or this raises
    assert job["schema"] == "torchdoctor/job_diagnosis" and job["world_size"] == 2
    assert [d["rank"] for d in job["ranks"]] == [0, 1]
    assert job["job"]["primary_bottleneck"] == "data_loading"
    [straggler] = job["cross_rank"]["stragglers"]
    assert (straggler["rank"], straggler["cause"]) == (1, "data")
    top = job["job"]["findings"][0]
    assert top["rule_id"] == "rank_straggler" and top["evidence"]["straggler_rank"] == 1
    rank0 = next(d for d in job["ranks"] if d["rank"] == 0)
    assert rank0["primary_bottleneck"] != "communication"
