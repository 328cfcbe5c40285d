"""`torchdoctor diff`: what changed between two traces, run folders or tuning results.

The traces are two recordings of one tiny job (tests/data/diff/record_traces.py), the second
with a planted data-loading wait: the diff must name the data wait as what changed most. A run
diffed with itself must find nothing significant, and bad input is one line and exit 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from torchdoctor.cli import main as cli_main
from torchdoctor.core import rundir
from torchdoctor.core.errors import UsageError
from torchdoctor.core.steps import StepTiming
from torchdoctor.diagnose.diff import MIN_STEP_SHARE, RunDiff, diff_inputs
from torchdoctor.measure import shift_estimate

DATA = Path(__file__).parents[2] / "data" / "diff"
PLAIN = DATA / "job_plain.json.gz"
WAIT = DATA / "job_data_wait.json.gz"

sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
from report_samples import make_run  # noqa: E402


def test_planted_data_wait_is_what_changed_most() -> None:
    diff = diff_inputs(PLAIN, WAIT)
    assert diff.kind == "trace"
    assert diff.most_changed == "DataLoader"
    top = diff.phases[0]
    assert top.name == "DataLoader" and top.significant
    assert top.ci is not None and top.ci[0] > 0  # the whole interval is a longer wait
    assert diff.verdict.startswith("DataLoader changed most")
    (finding,) = [f for f in diff.findings if f.rule_id == "dataloader_wait"]
    assert finding.share_b is not None and finding.share_a is not None
    assert finding.share_b > finding.share_a
    assert diff.primary == ("compute", "data_loading")
    # The reverse diff names the same change, the other way.
    back = diff_inputs(WAIT, PLAIN)
    assert back.most_changed == "DataLoader" and back.phases[0].shift < 0


def test_a_trace_diffed_with_itself_changes_nothing() -> None:
    diff = diff_inputs(WAIT, WAIT)
    assert diff.significant == []
    assert diff.most_changed is None
    assert diff.verdict == "nothing changed significantly"
    assert all(f.status == "stayed" for f in diff.findings)


def _steps(rng: np.random.Generator, n: int, data_wait_s: float) -> list[StepTiming]:
    out = []
    for i in range(n):
        phases = {
            "data_wait": data_wait_s + abs(rng.normal(0.0005, 0.0002)),
            "forward": rng.normal(0.010, 0.0005),
            "backward": rng.normal(0.020, 0.001),
            "optimizer": rng.normal(0.003, 0.0002),
        }
        out.append(StepTiming(index=i, total_s=sum(phases.values()), phases=phases))
    return out


def _script_run(root: Path, name: str, data_wait_s: float, seed: int) -> Path:
    from torchdoctor.collect.script_profile import ScriptProfile

    run_dir = rundir.new_run_dir("diagnose", "train.py", out=root / name)
    steps = _steps(np.random.default_rng(seed), 30, data_wait_s)
    ScriptProfile(argv=["train.py"], steps=steps).write(run_dir / rundir.PROFILE)
    rundir.finish_run_dir(run_dir)
    return run_dir


def test_run_folders_name_the_phase_that_moved(tmp_path: Path) -> None:
    before = _script_run(tmp_path, "before", 0.0, seed=1)
    after = _script_run(tmp_path, "after", 0.015, seed=2)
    diff = diff_inputs(before, after)
    assert diff.kind == "run" and diff.phase_source == "phases"
    assert diff.most_changed == "data_wait"
    assert diff.step is not None and diff.step.significant and diff.step.shift > 0
    # The phases that did not move are not called significant, with independent noise.
    assert {c.name for c in diff.phases if c.significant} == {"data_wait"}


def test_a_run_folder_diffed_with_itself_changes_nothing(tmp_path: Path) -> None:
    run = _script_run(tmp_path, "one", 0.005, seed=3)
    diff = diff_inputs(run, run)
    assert diff.significant == [] and diff.verdict == "nothing changed significantly"


def test_tuning_results_compare_headlines_and_recipes(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a")
    b = make_run(tmp_path / "b")
    data = json.loads((b / rundir.TUNE).read_text())
    data["best_recipe"] = {**data["best_recipe"], "threads": 1}
    (b / rundir.TUNE).write_text(json.dumps(data))
    diff = diff_inputs(a / rundir.TUNE, b / rundir.TUNE)
    assert diff.kind == "tune"
    assert [r.knob for r in diff.recipe] == ["threads"]
    assert [c.name for c in diff.throughput] == ["baseline", "best"]
    assert all(c.ci is None and not c.significant for c in diff.throughput)
    assert "best recipes differ in 1 knob(s)" in diff.verdict
    same = diff_inputs(a, a)
    assert same.recipe == [] and same.significant == []


def test_different_kinds_and_missing_paths_are_usage_errors(tmp_path: Path) -> None:
    run = _script_run(tmp_path, "one", 0.0, seed=4)
    with pytest.raises(UsageError, match="cannot diff a profiler trace"):
        diff_inputs(PLAIN, run)
    with pytest.raises(UsageError, match="no such file or folder"):
        diff_inputs(tmp_path / "missing", run)


@pytest.mark.parametrize("which", ["missing", "kinds"])
def test_cli_bad_input_is_one_line_and_exit_2(
    which: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "missing" if which == "missing" else _script_run(tmp_path, "r", 0.0, 5)
    assert cli_main.main(["diff", str(PLAIN), str(other)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert captured.err.startswith("error: ")
    assert not (tmp_path / "torchdoctor-runs").exists()


def test_cli_json_is_one_document_and_the_report_has_the_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from torchdoctor.report.api import render_text
    from torchdoctor.report.load import read_input

    # B waits for data where A did not: slower, so diff exits 1 for a CI job to gate on.
    assert cli_main.main(["diff", "--json", str(PLAIN), str(WAIT), "--no-report"]) == 1
    captured = capsys.readouterr()
    assert "regression: B is slower than A" in captured.err
    doc = json.loads(captured.out)
    assert doc["schema"] == "torchdoctor/run_diff" and doc["most_changed"] == "DataLoader"
    # The run folder `diff` writes, rendered by the report's registry (Markdown: no charts).
    run_dir = rundir.new_run_dir("diff", "a-vs-b", out=tmp_path / "d")
    (run_dir / rundir.DIFF).write_text(json.dumps(doc))
    assert RunDiff.read(run_dir / rundir.DIFF).most_changed == "DataLoader"
    rundir.finish_run_dir(run_dir)
    md = render_text(read_input(run_dir), "md")
    assert "## What changed" in md and "DataLoader changed most" in md
    assert "What is missing" not in md


def test_diff_gates_on_a_regression_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert diff_inputs(PLAIN, WAIT).regressed
    assert not diff_inputs(WAIT, PLAIN).regressed  # faster is no regression
    assert not diff_inputs(PLAIN, PLAIN).regressed
    assert cli_main.main(["diff", str(WAIT), str(PLAIN), "--no-report"]) == 0


def test_shift_interval_keeps_its_confidence_on_no_change() -> None:
    """Two samples of one distribution: the interval excludes zero in about 5% of draws
    (the binomial 95% bound for 200 draws at a 5% rate is 8%); a real shift is found and covered."""
    rng = np.random.default_rng(0)
    false = sum(
        shift_estimate(rng.lognormal(0, 0.3, 12), rng.lognormal(0, 0.3, 12)).excludes_zero
        for _ in range(200)
    )
    assert false / 200 <= 0.08
    est = shift_estimate(rng.normal(1.0, 0.1, 20), rng.normal(1.5, 0.1, 20))
    assert est.ci is not None and est.ci[0] < 0.5 < est.ci[1] and est.excludes_zero
    assert shift_estimate([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]).ci is None  # too few for one
    assert MIN_STEP_SHARE > 0


def test_gpu_traces_compare_kernels_and_say_when_steps_are_too_few() -> None:
    traces = Path(__file__).parents[2] / "data" / "traces"
    rocm = traces / "hta_mi250_minitoy.json.gz"  # 2 profiled steps, 13 kernel names
    diff = diff_inputs(rocm, rocm)
    assert diff.kernels and all(c.ci is None and not c.significant for c in diff.kernels)
    assert any("fewer than 4 steps" in n for n in diff.notes)
    assert diff.verdict == "nothing changed significantly"
    stepless = traces / "hta_alexnet_a100.json.gz"  # no ProfilerStep ranges
    bare = diff_inputs(stepless, stepless)
    assert bare.step is None and any("no recorded steps" in n for n in bare.notes)


def test_tuning_results_with_final_ab_rates_compare_the_best_with_an_interval(
    tmp_path: Path,
) -> None:
    runs = {"a": [100.0, 102.0, 98.0, 101.0], "b": [130.0, 128.0, 133.0, 131.0]}
    for name, rates in runs.items():
        run = make_run(tmp_path / name)
        confirm = {"schema": "torchdoctor/tune_confirmation", "version": 3, "rates": rates}
        (run / rundir.TRIALS / "999-confirm.json").write_text(json.dumps(confirm))
    diff = diff_inputs(tmp_path / "a" / "run", tmp_path / "b" / "run")
    best = next(c for c in diff.throughput if c.name == "best recipe")
    assert best.significant and best.ci is not None and best.ci[0] > 0
    assert [c.name for c in diff.throughput] == ["best recipe", "baseline"]
