"""Stage: report (see docs/DESIGN.md). Renders records into HTML, Markdown and JSON; computes
nothing.

    from torchdoctor.report import write_reports
    write_reports(run_dir)        # report.html + report.md in the run folder

What the report shows is registered by record type (report/registry.py): a record type, the
adapter that turns it into a view, and the section that renders the view as HTML, Markdown and
on a terminal. The built-in sections are in report/sections/. A command prints the records it
holds by the same sections (`render_records`), a run folder by `render_sections`.

The terminal forms (report/terminal/) are loaded on first use, so printing one command's
tables loads only their modules and the records they read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.core.lazy import lazy_getattr
from torchdoctor.report.api import FORMATS, ReportFormat, render_report, write_reports

if TYPE_CHECKING:
    from torchdoctor.report.sections.memory import memory_summary
    from torchdoctor.report.terminal.analysis import render_analysis
    from torchdoctor.report.terminal.bench import render_comparison, render_measurement
    from torchdoctor.report.terminal.diagnosis import (
        render_diagnosis,
        render_job,
        render_run_folder,
    )
    from torchdoctor.report.terminal.env import render_env
    from torchdoctor.report.terminal.live import TuneWatch
    from torchdoctor.report.terminal.live_stages import StageWatch
    from torchdoctor.report.terminal.profile import render_profile
    from torchdoctor.report.terminal.recheck import render_recheck
    from torchdoctor.report.terminal.run import render_run
    from torchdoctor.report.terminal.script_run import render_script_run
    from torchdoctor.report.terminal.sections import render_records, render_sections
    from torchdoctor.report.terminal.tune import fmt_change, render_result
    from torchdoctor.report.terminal.workloads import workloads_table

_TERMINAL = "torchdoctor.report.terminal"
_LAZY_EXPORTS = {
    "StageWatch": f"{_TERMINAL}.live_stages",
    "TuneWatch": f"{_TERMINAL}.live",
    "fmt_change": f"{_TERMINAL}.tune",
    "render_analysis": f"{_TERMINAL}.analysis",
    "render_comparison": f"{_TERMINAL}.bench",
    "render_diagnosis": f"{_TERMINAL}.diagnosis",
    "render_env": f"{_TERMINAL}.env",
    "render_job": f"{_TERMINAL}.diagnosis",
    "render_run_folder": f"{_TERMINAL}.diagnosis",
    "render_measurement": f"{_TERMINAL}.bench",
    "memory_summary": "torchdoctor.report.sections.memory",
    "render_profile": f"{_TERMINAL}.profile",
    "render_result": f"{_TERMINAL}.tune",
    "render_recheck": f"{_TERMINAL}.recheck",
    "render_run": f"{_TERMINAL}.run",
    "render_script_run": f"{_TERMINAL}.script_run",
    "render_records": f"{_TERMINAL}.sections",
    "render_sections": f"{_TERMINAL}.sections",
    "workloads_table": f"{_TERMINAL}.workloads",
}

__all__ = [
    "FORMATS",
    "ReportFormat",
    "StageWatch",
    "TuneWatch",
    "fmt_change",
    "memory_summary",
    "render_analysis",
    "render_comparison",
    "render_diagnosis",
    "render_env",
    "render_job",
    "render_measurement",
    "render_profile",
    "render_recheck",
    "render_records",
    "render_report",
    "render_result",
    "render_run",
    "render_run_folder",
    "render_script_run",
    "render_sections",
    "workloads_table",
    "write_reports",
]

__getattr__ = lazy_getattr(__name__, _LAZY_EXPORTS)
