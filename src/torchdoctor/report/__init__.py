"""Stage: report (see docs/DESIGN.md). Renders records into HTML, Markdown and JSON; computes
nothing.

    from torchdoctor.report import write_reports
    write_reports(run_dir)        # report.html + report.md in the run folder
"""

from torchdoctor.report.api import FORMATS, ReportFormat, render_report, write_reports

__all__ = ["FORMATS", "ReportFormat", "render_report", "write_reports"]
