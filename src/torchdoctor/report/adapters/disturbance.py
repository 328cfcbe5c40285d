"""Warnings that the machine was disturbed while the records were measured (core.load).

Every record that measured something carries a `machine_load`; a disturbed one's warning is
shown at the top of the report, because every number below it was taken on a busy machine.
"""

from __future__ import annotations

from torchdoctor.report.adapters._access import JsonDict, get, mapping, text

#: Where a record says what it is, for the warning's label.
_LABELS = {
    "diagnosis": "diagnosis",
    "run_result": "run",
    "tune": "tune",
}


def _warning(record: JsonDict) -> str | None:
    load = mapping(record, "machine_load")
    return text(load, "warning") if load and get(load, "disturbed") else None


def disturbance_warnings(
    records: dict[str, JsonDict], env: dict[str, JsonDict], trials: list[JsonDict]
) -> list[str]:
    out: list[str] = []
    for key, label in _LABELS.items():
        record = records.get(key)
        warning = _warning(record) if record else None
        if warning:
            out.append(f"{label}: {warning}")
    ceilings = env.get("ceilings")
    warning = _warning(ceilings) if ceilings else None
    if warning:
        out.append(f"ceilings (measured on a disturbed machine, not cached): {warning}")
    disturbed = [t for t in trials if _warning(t)]
    if disturbed:
        out.append(
            f"tune: {len(disturbed)} trial(s) compared while the machine was disturbed, even "
            "after measuring them again (see the trials' machine_load)"
        )
    return out
