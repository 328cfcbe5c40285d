"""`torchdoctor tune -- torchrun --nproc-per-node 2 fsdp2_blocks.py --knobs fsdp_mixed_precision`:
a real 2-rank gloo FSDP2 job (tests/scripts/fsdp2_blocks.py) tuned as one arm, the knob
injected at both ranks' `fully_shard` calls and judged to a verdict like any other: its
quality against the baseline's six references, its speed by the interleaved A/B (and a fresh
pair where it wins). A study: every arm is a torchrun job (the baseline's seven launches and
the candidate's, minutes on a 2-core host).

The zoo's planted problems cured under a slow link, each claim re-measured by `run --recipe RUN
--vs-baseline -- torchrun ...`, take about twenty minutes a plant on a 2-core host: that is
benchmarks/bench_fsdp_remeasure.py, not a test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_output import one_error_line
from torchdoctor.cli.main import main
from torchdoctor.knobs import FSDP_MIXED_PRECISION, FSDP_PREFETCH
from torchdoctor.tune import Outcome
from torchdoctor.tune.records import read_trial

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "fsdp2_blocks.py"
#: Long enough that no arm ends while it is measured.
JOB = [str(SCRIPT), "--steps", "100000"]
#: The study's budget: as tests/integration/test_tune_torchrun.py's, whose baseline's seven
#: torchrun launches took over three minutes on this host; the run stops after its one trial.
BUDGET = "20m"
#: The outcomes that are a verdict on the knob: measured and judged, not failed to act.
VERDICTS = {Outcome.KEPT, Outcome.NOT_FASTER, Outcome.NOT_REPRODUCED, Outcome.QUALITY}


@pytest.mark.study
@pytest.mark.untimed  # any verdict passes: what is asserted rests on no timing
@pytest.mark.timeout(1500)  # a hang fails the test instead of blocking CI
def test_an_fsdp_knob_is_tuned_on_a_torchrun_job_to_a_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "tune"
    code = main(
        ["--json", "tune", "--budget", BUDGET, "--knobs", FSDP_MIXED_PRECISION.name,
         "--out", str(run), "--", "torchrun", "--nproc-per-node", "2", *JOB]
    )  # fmt: skip
    capsys.readouterr()
    assert code == 0, (run / "run.json").read_text()
    trials = [read_trial(p) for p in sorted((run / "trials").iterdir())]
    baseline, *rest = trials
    assert baseline.kind == "baseline" and len(baseline.reference_losses) == 6
    candidates = [t for t in rest if t.change.get(FSDP_MIXED_PRECISION.name) is not None]
    assert candidates and all(t.outcome in VERDICTS for t in candidates), [
        (t.change, t.outcome, t.reason) for t in rest
    ]


@pytest.mark.study
@pytest.mark.untimed  # a refusal, no timing
@pytest.mark.timeout(1500)
def test_ranks_that_disagree_on_an_fsdp_knob_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # rank 1 shards past the injection: prefetching acts on rank 0 only (the collectives
    # still match: explicit prefetching issues the same all-gathers in the same order, earlier)
    run = tmp_path / "tune"
    code = main(
        ["--json", "tune", "--budget", BUDGET, "--knobs", FSDP_PREFETCH.name,
         "--out", str(run), "--", "torchrun", "--nproc-per-node", "2", *JOB,
         "--unpatched-on-rank", "1"]
    )  # fmt: skip
    line = one_error_line(capsys.readouterr().err)
    manifest = json.loads((run / "run.json").read_text())
    assert code == 2
    assert "disagree on the recipe" in line and "fsdp_prefetch" in line
    assert manifest["status"] == "failed" and "disagree on the recipe" in manifest["error"]
