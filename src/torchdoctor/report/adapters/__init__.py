"""Per-record adapters: each reads records' JSON forms and returns one section's view.

`build_view` runs the adapter of every registered section (report/registry.py) and adds the
header, the missing records and the machine's disturbance warnings.
"""

from __future__ import annotations

from torchdoctor.report.adapters._access import text
from torchdoctor.report.adapters.disturbance import disturbance_warnings
from torchdoctor.report.adapters.missing import missing_records
from torchdoctor.report.adapters.reproduce import shown_path
from torchdoctor.report.load import RunRecords
from torchdoctor.report.records import TUNE_CONFIG
from torchdoctor.report.registry import sections
from torchdoctor.report.views import Header, ReportView

__all__ = ["build_view"]

#: Run kinds a `torchdoctor tune --resume RUN` continues when they stop before the end.
RESUMABLE_KINDS = ("tune", "demo")


def _resume(found: RunRecords, kind: str, status: str) -> str | None:
    """The command that continues an unfinished tune: its study's settings (tune_config.json)
    are in the run folder, so `--resume` can pick it up where it stopped."""
    if kind not in RESUMABLE_KINDS or status == "complete" or TUNE_CONFIG.file not in found.files:
        return None
    return f"torchdoctor tune --resume {shown_path(found.source)}"


def _header(found: RunRecords) -> Header:
    m = found.manifest
    if m is None:
        return Header(
            title=f"torchdoctor report: {found.source.name}",
            kind="record",
            target=str(found.source),
            status="single record",
        )
    command = [str(a) for a in m.get("command") or []]
    kind = text(m, "kind") or ""
    status = text(m, "status") or "unknown"
    return Header(
        title=f"torchdoctor {text(m, 'kind')}: {text(m, 'target')}",
        kind=kind,
        target=text(m, "target") or "",
        status=status,
        created=text(m, "created"),
        finished=text(m, "finished"),
        error=text(m, "error"),
        command=" ".join(["torchdoctor", *command[1:]]) if command else None,
        torchdoctor_version=text(m, "torchdoctor_version"),
        resume=_resume(found, kind, status),
    )


def build_view(found: RunRecords) -> ReportView:
    return ReportView(
        header=_header(found),
        sections={s.name: s.adapter(found) for s in sections()},
        missing=missing_records(found),
        warnings=disturbance_warnings(found),
    )
