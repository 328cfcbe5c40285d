"""Results render in a notebook: `_repr_html_` on every record, the main ones as their command
prints them, every string escaped."""

from __future__ import annotations

import sys
from pathlib import Path

from torchdoctor.core.steps import StepTiming
from torchdoctor.diagnose.diff import diff_inputs
from torchdoctor.tune import TuneResult

sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
from report_samples import EVIL_OP, diagnosis_record, make_run

DIFF_DATA = Path(__file__).parents[2] / "data" / "diff"


def test_diagnosis_shows_its_verdict_and_findings_escaped() -> None:
    diag = diagnosis_record()
    page = diag._repr_html_()
    assert diag.primary_bottleneck in page
    assert all(f.title.split("<")[0] in page for f in diag.findings)
    assert "<script>" not in page  # the sample's hostile text is escaped


def test_tune_result_shows_the_ladder(tmp_path: Path) -> None:
    result = TuneResult.read(make_run(tmp_path) / "tune.json")
    page = result._repr_html_()
    assert f"{result.speedup:.2f}x" in page
    assert page.count("<tr>") >= len(result.ladder.rungs)
    assert EVIL_OP not in page


def test_any_record_has_a_table_and_a_diff_its_verdict() -> None:
    step = StepTiming(index=3, total_s=0.25, phases={"forward": 0.1})
    page = step._repr_html_()
    assert "StepTiming" in page and "0.25" in page
    diff = diff_inputs(DIFF_DATA / "job_plain.json.gz", DIFF_DATA / "job_data_wait.json.gz")
    assert "DataLoader changed most" in diff._repr_html_()
