"""Which records a run of each kind should hold, and what their absence means.

Each record type says which run kinds write it (`RecordType.written_by`) and which sections
it feeds (`RecordType.feeds`); a record a finished run of that kind lacks is listed, with why.
"""

from __future__ import annotations

from torchdoctor.report.adapters._access import JsonDict, text
from torchdoctor.report.load import RunRecords
from torchdoctor.report.records import ENV, TRIALS
from torchdoctor.report.registry import RecordType, record_types
from torchdoctor.report.views import MissingRecord


def _why(manifest: JsonDict) -> str:
    status = text(manifest, "status") or "unknown"
    if status == "running":
        return (
            "the run never finished (run.json still says 'running': it was killed, "
            "or is still going)"
        )
    if status == "failed":
        return f"the run failed: {text(manifest, 'error') or 'no reason recorded'}"
    return "the run completed without writing it"


def _present(found: RunRecords) -> set[str]:
    present = set(found.records)
    if found.env:
        present.add(ENV.key)
    if found.trials:
        present.add(TRIALS.key)
    return present


def all_record_types() -> list[RecordType]:
    """Every record a run folder can hold: env.json, the registered records, trials/."""
    return [ENV, *record_types(), TRIALS]


def missing_records(found: RunRecords) -> list[MissingRecord]:
    manifest = found.manifest
    if manifest is None:
        return []
    kind = text(manifest, "kind") or ""
    present = _present(found)
    why = _why(manifest)
    types = all_record_types()
    # A record written in another's place stands for it (`RecordType.instead_of`).
    present |= {r.instead_of for r in types if r.key in present and r.instead_of is not None}
    present |= {r.key for r in types if r.instead_of is not None and r.instead_of in present}
    return [
        MissingRecord(file=r.file, section=r.feeds, why=why)
        for r in types
        if kind in r.written_by and r.key not in present
    ]
