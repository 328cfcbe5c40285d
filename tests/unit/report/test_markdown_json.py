from __future__ import annotations

import json
from pathlib import Path

from report_samples import EVIL_OP

from torchdoctor.diagnose import Diagnosis
from torchdoctor.report import render_report, write_reports
from torchdoctor.report.markdown import md


def test_md_escapes_markup_and_table_breakers() -> None:
    assert md("a|b") == "a\\|b"
    assert md("`x`") == "\\`x\\`"
    assert md(EVIL_OP) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert md("[x](http://e) *b* ~s~ a\\b") == "\\[x\\](http://e) \\*b\\* \\~s\\~ a\\\\b"
    assert md("two\nlines") == "two lines"


def test_markdown_tables_keep_their_shape(run_dir: Path) -> None:
    text = render_report(run_dir, "md").read_text()
    assert "<script>" not in text and "<b>" not in text
    for block in text.split("\n\n"):
        rows = [r for r in block.splitlines() if r.startswith("|")]
        if rows:
            # Unescaped pipes only: a hostile string must not add a column.
            widths = {len(r.replace("\\|", "").split("|")) for r in rows}
            assert len(widths) == 1, block
    assert "## Tuning ladder" in text and "## Findings, ranked by bound on gain" in text


def test_json_bundles_the_records_as_read(run_dir: Path) -> None:
    data = json.loads(render_report(run_dir, "json").read_text())
    assert data["schema"] == "torchdoctor/report_bundle" and data["version"] == 1
    assert Diagnosis.from_json_dict(data["records"]["diagnosis"]) == Diagnosis.read(
        run_dir / "diagnosis.json"
    )
    assert len(data["trials"]) == 5 and data["missing"] == []
    assert data["manifest"]["status"] == "complete"


def test_write_reports_writes_html_and_md_into_the_run_folder(run_dir: Path) -> None:
    paths = write_reports(run_dir)
    assert paths == [run_dir / "report.html", run_dir / "report.md"]
    assert all(p.stat().st_size > 0 for p in paths)
    assert all(p.stat().st_mode & 0o044 == 0o044 for p in paths)  # shareable, not private
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]
