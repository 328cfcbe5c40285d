"""The report's public API: render one format, or write the run folder's reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final, Literal

from torchdoctor._version import __version__
from torchdoctor.core import rundir
from torchdoctor.core.errors import ReportError
from torchdoctor.core.io import atomic_write_text
from torchdoctor.report.adapters import build_view
from torchdoctor.report.load import RunRecords, read_input

ReportFormat = Literal["html", "md", "json"]
FORMATS: Final[tuple[ReportFormat, ...]] = ("html", "md", "json")
BUNDLE_SCHEMA: Final = "torchdoctor/report_bundle"
BUNDLE_VERSION: Final = 1
_RUN_DIR_NAMES: Final[dict[str, str]] = {
    "html": rundir.REPORT_HTML,
    "md": rundir.REPORT_MD,
    "json": "report.json",
}


def bundle(found: RunRecords) -> dict[str, Any]:
    """The JSON form: every record the report read, as read, and what is missing."""
    view = build_view(found)
    return {
        "schema": BUNDLE_SCHEMA,
        "version": BUNDLE_VERSION,
        "torchdoctor_version": __version__,
        "source": str(found.source),
        "manifest": found.manifest,
        "env": found.env or None,
        "records": found.records,
        "trials": found.trials,
        "missing": [{"file": m.file, "section": m.section, "why": m.why} for m in view.missing],
    }


def render_text(found: RunRecords, fmt: ReportFormat) -> str:
    """The report of `found` in one format, as text."""
    if fmt == "json":
        return json.dumps(bundle(found), indent=2, allow_nan=False) + "\n"
    view = build_view(found)
    if fmt == "md":
        from torchdoctor.report.markdown import render_markdown

        return render_markdown(view)
    from torchdoctor.report.charts import render_charts
    from torchdoctor.report.html import render_html

    return render_html(view, render_charts(view))


def default_output(source: Path, fmt: ReportFormat) -> Path:
    """report.<fmt> inside a run folder; <record>.report.<fmt> next to a lone record file."""
    if source.is_dir():
        return source / _RUN_DIR_NAMES[fmt]
    return source.with_name(f"{source.stem}.report.{fmt}")


def render_report(
    run_dir: str | Path, fmt: ReportFormat = "html", out: str | Path | None = None
) -> Path:
    """Render the report of a run folder (or one record file) and write it; return its path."""
    if fmt not in FORMATS:
        raise ReportError(f"unknown report format {fmt!r}", hint="use html, md or json")
    source = Path(run_dir)
    if source.name == rundir.MANIFEST and source.is_file():
        source = source.parent  # the manifest stands for its run folder
    found = read_input(source)
    target = Path(out) if out is not None else default_output(source, fmt)
    if target.is_dir():
        raise ReportError(f"{target}: is a folder", hint="pass a file name to -o")
    return atomic_write_text(target, render_text(found, fmt))


def write_reports(run_dir: str | Path) -> list[Path]:
    """Write report.html and report.md into a run folder (called at the end of each run)."""
    return [render_report(run_dir, "html"), render_report(run_dir, "md")]
