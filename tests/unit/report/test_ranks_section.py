"""The "Across ranks" section: a job's per-rank table, skew and stragglers, in every form,
from a run folder `diagnose` wrote for a folder of per-rank traces (tests/data/traces)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from torchdoctor.diagnose import examine_trace
from torchdoctor.report.adapters import build_view
from torchdoctor.report.api import render_text
from torchdoctor.report.charts import Charts
from torchdoctor.report.html import render_html
from torchdoctor.report.load import read_input
from torchdoctor.report.terminal.diagnosis import render_job
from torchdoctor.report.terminal.sections import render_sections

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"


@pytest.fixture(scope="module")
def job_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("job") / "run"
    examine_trace(TRACES / "ddp_gloo_straggler_data", out=run)
    return run


def test_markdown_and_html_show_each_rank_and_the_straggler(job_run: Path) -> None:
    found = read_input(job_run)
    md = render_text(found, "md")
    assert "## Across ranks" in md
    assert "| rank 0 |" in md and "| rank 1 |" in md
    assert "exposed comm" in md and "data wait" in md
    assert "Straggler: rank 1 waits on data" in md
    # the page without drawing its charts (matplotlib costs seconds; charts are not ours)
    html = render_html(build_view(found), Charts())
    assert '<section id="ranks">' in html and "rank 1 waits on data" in html


def test_the_terminal_shows_the_table_then_the_jobs_verdict(job_run: Path) -> None:
    from torchdoctor.diagnose.ranks import JobDiagnosis

    job = JobDiagnosis.read(job_run / "job_diagnosis.json")
    out = StringIO()
    render_job(job, Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert text.index("Across ranks") < text.index("job of 2 ranks: Primary bottleneck")
    assert "data_loading" in text and "rank_straggler" in text
    out = StringIO()
    render_sections(Console(file=out, width=200, color_system=None), job_run, only=["ranks"])
    assert "rank 1 waits on data" in out.getvalue()


def test_a_folder_analysis_carries_the_section_too(tmp_path: Path) -> None:
    from torchdoctor.analyze import analyze_trace

    analysis = analyze_trace(TRACES / "ddp_gloo_straggler_compute")
    analysis.write(tmp_path / "analysis.json")
    md = render_text(read_input(tmp_path / "analysis.json"), "md")
    assert "Straggler: rank 1 computes slower" in md
