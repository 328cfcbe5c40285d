"""Stage: report (see docs/DESIGN.md). Renders records into HTML, Markdown and JSON; computes
nothing.

    from torchdoctor.report import write_reports
    write_reports(run_dir)        # report.html + report.md in the run folder

What the report shows is registered by record type (report/registry.py): a record type, the
adapter that turns it into a view, and the section that renders the view as HTML, Markdown and
on a terminal (`render_sections`). The built-in sections are in report/sections/.

The terminal renderers (`render_run`, `render_diagnosis`, ...: report/terminal/, one module per
command) are loaded on first use, so printing one command's tables loads only its module and
the records it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.core.lazy import lazy_getattr
from torchdoctor.report.api import FORMATS, ReportFormat, render_report, write_reports

if TYPE_CHECKING:
    from torchdoctor.report.terminal.analysis import render_analysis
    from torchdoctor.report.terminal.bench import render_comparison, render_measurement
    from torchdoctor.report.terminal.diagnosis import render_diagnosis, render_job
    from torchdoctor.report.terminal.diff import render_diff
    from torchdoctor.report.terminal.env import render_env
    from torchdoctor.report.terminal.live import TuneWatch
    from torchdoctor.report.terminal.live_stages import StageWatch
    from torchdoctor.report.terminal.memory import (
        memory_summary,
        render_memory,
        render_shard_plan,
    )
    from torchdoctor.report.terminal.profile import render_profile
    from torchdoctor.report.terminal.recheck import render_recheck
    from torchdoctor.report.terminal.run import render_run
    from torchdoctor.report.terminal.scale import render_scaling
    from torchdoctor.report.terminal.script_run import render_script_run
    from torchdoctor.report.terminal.sections import render_sections
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
    "render_diff": f"{_TERMINAL}.diff",
    "render_env": f"{_TERMINAL}.env",
    "render_job": f"{_TERMINAL}.diagnosis",
    "render_measurement": f"{_TERMINAL}.bench",
    "render_memory": f"{_TERMINAL}.memory",
    "memory_summary": f"{_TERMINAL}.memory",
    "render_shard_plan": f"{_TERMINAL}.memory",
    "render_profile": f"{_TERMINAL}.profile",
    "render_result": f"{_TERMINAL}.tune",
    "render_recheck": f"{_TERMINAL}.recheck",
    "render_run": f"{_TERMINAL}.run",
    "render_scaling": f"{_TERMINAL}.scale",
    "render_script_run": f"{_TERMINAL}.script_run",
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
    "render_diff",
    "render_env",
    "render_job",
    "render_measurement",
    "render_memory",
    "render_profile",
    "render_recheck",
    "render_report",
    "render_result",
    "render_run",
    "render_scaling",
    "render_script_run",
    "render_sections",
    "render_shard_plan",
    "workloads_table",
    "write_reports",
]

__getattr__ = lazy_getattr(__name__, _LAZY_EXPORTS)
