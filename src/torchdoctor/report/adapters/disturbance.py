"""Warnings that the machine was disturbed while the records were measured (core.load).

Every record that measured something carries a `machine_load`; a disturbed one's warning is
shown at the top of the report, because every number below it was taken on a busy machine.
A record type names its warning's label (`RecordType.warns_as`).
"""

from __future__ import annotations

from torchdoctor.report.adapters._access import JsonDict, get, mapping, text
from torchdoctor.report.load import RunRecords
from torchdoctor.report.registry import record_types


def _warning(record: JsonDict) -> str | None:
    load = mapping(record, "machine_load")
    return text(load, "warning") if load and get(load, "disturbed") else None


def disturbance_warnings(found: RunRecords) -> list[str]:
    out: list[str] = []
    for record_type in record_types():
        record = found.records.get(record_type.key)
        warning = _warning(record) if record and record_type.warns_as else None
        if warning:
            out.append(f"{record_type.warns_as}: {warning}")
    ceilings = found.env.get("ceilings")
    warning = _warning(ceilings) if ceilings else None
    if warning:
        out.append(f"ceilings (measured on a disturbed machine, not cached): {warning}")
    disturbed = [t for t in found.trials if _warning(t)]
    if disturbed:
        out.append(
            f"tune: {len(disturbed)} trial(s) compared while the machine was disturbed, even "
            "after measuring them again (see the trials' machine_load)"
        )
    return out
