"""Per-record adapters: each reads records' JSON forms and returns one section's view.

`build_view` runs the adapter of every registered section (report/registry.py) and adds the
header, the missing records and the machine's disturbance warnings.
"""

from __future__ import annotations

from torchdoctor.report.adapters._access import text
from torchdoctor.report.adapters.disturbance import disturbance_warnings
from torchdoctor.report.adapters.missing import missing_records
from torchdoctor.report.load import RunRecords
from torchdoctor.report.model import Header, ReportView
from torchdoctor.report.registry import sections

__all__ = ["build_view"]


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
    return Header(
        title=f"torchdoctor {text(m, 'kind')}: {text(m, 'target')}",
        kind=text(m, "kind") or "",
        target=text(m, "target") or "",
        status=text(m, "status") or "unknown",
        created=text(m, "created"),
        finished=text(m, "finished"),
        error=text(m, "error"),
        command=" ".join(["torchdoctor", *command[1:]]) if command else None,
        torchdoctor_version=text(m, "torchdoctor_version"),
    )


def build_view(found: RunRecords) -> ReportView:
    return ReportView(
        header=_header(found),
        sections={s.name: s.adapter(found) for s in sections()},
        missing=missing_records(found),
        warnings=disturbance_warnings(found),
    )
