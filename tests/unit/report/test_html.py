from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
from report_samples import EVIL_OP, EVIL_SCRIPT, make_run

from torchdoctor.report import render_report
from torchdoctor.report.charts import _svg

#: A report far below "a few MB": the complete sample run renders to ~100 KB.
MAX_REPORT_BYTES = 2 * 2**20


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The complete sample run's HTML report, rendered once for the read-only tests."""
    return render_report(make_run(tmp_path_factory.mktemp("html")), "html")


def test_hostile_strings_are_escaped_everywhere(report: Path) -> None:
    html = report.read_text()
    assert EVIL_OP not in html and "<b>bold</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # Escaped inside the roofline's SVG text too (matplotlib escapes its own text).
    roofline = html[html.index('data-chart="roofline"') :]
    roofline = roofline[: roofline.index("</figure>")]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in roofline
    assert "<script" not in html.lower()


def test_every_chart_has_a_stable_container_with_svg(report: Path) -> None:
    html = report.read_text()
    figures = re.findall(r'<figure class="chart" data-chart="(\w+)"><svg', html)
    assert set(figures) == {"steps", "timeline", "roofline", "ladder", "pareto", "parity"}


def test_self_contained_and_small(report: Path) -> None:
    html = report.read_text()
    assert report.stat().st_size < MAX_REPORT_BYTES
    # Nothing fetched: no src attributes, no stylesheet links, no external hrefs or urls.
    assert " src=" not in html and "<link" not in html
    assert not re.search(r'href="(?!#)', html)
    assert not re.search(r"url\((?!#)", html)
    assert "@import" not in html and "@font-face" not in html


def test_svg_ids_are_unique_across_charts(report: Path) -> None:
    html = report.read_text()
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))
    # Every in-page reference resolves to an id of the page.
    refs = set(re.findall(r'(?:url\(#|href="#)([^")]+)', html))
    assert refs and refs <= set(ids)


def test_without_matplotlib_the_page_has_tables_and_says_how_to_get_charts(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_svg, "pyplot", lambda: None)
    # `torchdoctor.report` is the API's function; the stage's module is reached by its name.
    monkeypatch.setattr(
        importlib.import_module("torchdoctor.report.charts"), "pyplot", lambda: None
    )
    html = render_report(run_dir, "html").read_text()
    assert 'class="chart"' not in html
    assert "pip install &#39;torchdoctor[plot]&#39;" in html
    assert "aten::addmm" in html  # the roofline's op table is still there


def test_killed_run_report_lists_what_is_missing(killed_run_dir: Path) -> None:
    html = render_report(killed_run_dir, "html").read_text()
    assert 'id="missing"' in html and "status-running" in html
    assert "diagnosis.json" in html and "tune.json" in html and "never finished" in html
    assert EVIL_SCRIPT not in html


def test_output_path_and_lone_record(run_dir: Path, tmp_path: Path) -> None:
    out = render_report(run_dir, "html", tmp_path / "elsewhere" / "r.html")
    assert out == tmp_path / "elsewhere" / "r.html" and out.is_file()
    assert render_report(run_dir / "run.json", "md") == run_dir / "report.md"
    lone = render_report(run_dir / "tune.json", "html")
    assert lone == run_dir / "tune.report.html"
    assert 'data-chart="ladder"' in lone.read_text()
