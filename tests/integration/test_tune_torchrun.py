"""`torchdoctor tune -- torchrun --nproc_per_node 2 train.py`: a real 2-rank gloo DDP job
(tests/zoo/ddp_straggler.py, no straggler) tuned as one arm, then its recipe run on every rank
with `torchdoctor run --recipe -- torchrun`. A study: every arm is a torchrun job.

What it shows: the job is driven by one controller (rank 0 talks to the tuner, rank 1 follows
over the job's process group), the baseline and its six quality references are measured on the
whole job, a DDP knob is injected into both ranks' DistributedDataParallel and judged there
(the zoo's DDP already runs without the unused-parameter search, so that trial ends as "does
not apply", without an A/B, on both ranks alike), the study ends with a recipe, and `run`
applies that recipe identically on both ranks. Cost: the baseline launch, six reference
launches and one candidate launch of torchrun (about a minute on an idle 2-core host), then
one `run` launch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchdoctor.cli.main import main
from torchdoctor.tune import Outcome
from torchdoctor.tune.records import read_trial

ZOO = Path(__file__).resolve().parents[1] / "zoo" / "ddp_straggler.py"
#: The zoo job with no planted straggler; its dataset is long enough that no arm ends.
JOB = [str(ZOO), "--straggle", "none", "--batch-size", "64", "--steps", "100000"]
#: The study's budget. The tuner starts a trial only when the budget left covers its estimate
#: (about the baseline's time) and the reserve of the final A/B's fresh pairs: the baseline's 7
#: torchrun launches took over three minutes on this 2-core host under 8 other processes,
#: and 400 s left no room for the one trial. The run itself stops after that trial (its knob
#: does not act: no A/B, no confirmation), so the budget bounds it, not its length.
BUDGET = "20m"


@pytest.mark.study
@pytest.mark.untimed  # its one trial does not apply (no A/B): records, no timing
@pytest.mark.timeout(1500)  # a hang fails the test instead of blocking CI
def test_a_torchrun_job_is_tuned_as_one_arm_and_its_recipe_runs_on_every_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "tune"
    code = main(
        ["--json", "tune", "--budget", BUDGET, "--knobs", "find_unused_parameters",
         "--out", str(run), "--", "torchrun", "--nproc_per_node", "2", *JOB]
    )  # fmt: skip
    capsys.readouterr()
    assert code == 0, (run / "run.json").read_text()
    trials = [read_trial(p) for p in sorted((run / "trials").iterdir())]
    baseline, *rest = trials
    assert baseline.kind == "baseline" and len(baseline.reference_losses) == 6
    assert baseline.samples_per_s and baseline.samples_per_s > 0
    [candidate] = rest
    assert candidate.change == {"find_unused_parameters": False}
    assert candidate.outcome == Outcome.NOT_APPLICABLE
    assert "already runs with find_unused_parameters=false" in (candidate.reason or "")
    best = json.loads((run / "best_recipe.json").read_text())
    config = json.loads((run / "tune_config.json").read_text())
    assert config["command"][0] == "torch.distributed.run" and config["module"] is True

    # The recipe as `run --recipe RUN -- torchrun ...` applies it: the same on both ranks.
    out = tmp_path / "run"
    code = main(
        ["run", "--json", "--recipe", str(run), "--out", str(out), "--warmup", "1", "--",
         "torchrun", "--standalone", "--nproc_per_node", "2", *JOB[:-1], "12"]
    )  # fmt: skip
    assert code == 0
    ran = json.loads(capsys.readouterr().out)
    assert ran["recipe"] == best and ran["exit_code"] == 0 and ran["steps"] > 0
    records = [
        json.loads((out / "collect" / f"injection.rank{r}.json").read_text()) for r in (0, 1)
    ]
    assert records[0]["knobs"] == records[1]["knobs"]
