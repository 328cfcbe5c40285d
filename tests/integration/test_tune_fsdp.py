"""`torchdoctor tune -- torchrun --nproc-per-node 2 fsdp2_blocks.py --knobs fsdp_mixed_precision`:
a real 2-rank gloo FSDP2 job (tests/scripts/fsdp2_blocks.py) tuned as one arm, the knob
injected at both ranks' `fully_shard` calls and judged to a verdict like any other: its
quality against the baseline's six references, its speed by the interleaved A/B (and a fresh
pair where it wins). A study: every arm is a torchrun job (the baseline's seven launches and
the candidate's, minutes on a 2-core host).

Under a loopback made slow with a network namespace and tbf (conftest.slow_loopback), the
zoo's planted reshard (tests/zoo/fsdp2_train.py --plant reshard: every block gathered again in
backward) is cured by the knob diagnose prescribes for it, reshard_after_forward=False, and
the claim holds when `run --recipe RUN --vs-baseline -- torchrun ...` re-measures it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_output import one_error_line
from torchdoctor.cli.main import main
from torchdoctor.knobs import FSDP_MIXED_PRECISION, FSDP_PREFETCH, RESHARD_AFTER_FORWARD
from torchdoctor.tune import Confirmation, Outcome
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


ZOO = Path(__file__).resolve().parents[1] / "zoo" / "fsdp2_train.py"
SRC = Path(__file__).resolve().parents[2] / "src"
#: The A/B's fresh pairs, in the tune's final A/B and in the re-measure: the fewest `--pairs`
#: takes, each pair two torchrun jobs.
PAIRS = "3"


def _cli_in(netns: str, *args: str) -> dict[str, Any]:
    """`torchdoctor --json ARGS` run inside the network namespace, its torchrun jobs' gloo on
    the namespace's shaped loopback; its JSON document."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "GLOO_SOCKET_IFNAME": "lo"}
    argv = ["ip", "netns", "exec", netns, sys.executable, "-m", "torchdoctor", "--json", *args]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


@pytest.mark.study  # timed: the kept knob and the re-measure rest on the A/B's timing
# About 18 minutes on a shared 2-core host (the tune 761 s: the baseline and its six quality
# references, two candidates, three fresh pairs; the re-measure's three pairs 276 s).
@pytest.mark.timeout(3000)  # a hang fails the test instead of blocking CI
def test_a_planted_reshard_under_a_slow_link_is_cured_and_its_claim_holds(
    tmp_path: Path, slow_loopback: str
) -> None:
    # the zoo's job re-gathers each block in backward (reshard_after_forward=True) under a
    # link slow enough that the all-gathers bound its step (conftest.SLOW_LINK_MBIT)
    job = ["torchrun", "--nproc_per_node", "2", str(ZOO), "--plant", "reshard", *JOB[1:]]
    run = tmp_path / "tune"
    claim = _cli_in(
        slow_loopback, "tune", "--budget", BUDGET, "--knobs", RESHARD_AFTER_FORWARD.name,
        "--pairs", PAIRS, "--out", str(run), "--", *job,
    )  # fmt: skip
    assert claim["best_recipe"] == {RESHARD_AFTER_FORWARD.name: False}, claim.get("notes")
    confirm = read_trial(sorted((run / "trials").iterdir())[-1])
    assert isinstance(confirm, Confirmation) and confirm.outcome is Outcome.MEASURED
    low, high = claim["speedup_ci"]
    # the claim re-measured the way a user would check it: fresh pairs of whole jobs
    again = _cli_in(
        slow_loopback, "run", "--recipe", str(run), "--vs-baseline", "--pairs", PAIRS,
        "--steps", str(confirm.steps), "--out", str(tmp_path / "again"), "--", *job,
    )  # fmt: skip
    assert low <= again["speedup"] <= high, (again["speedup"], claim["speedup_ci"])
