"""The report's sections on a terminal: the one walk every command's results are printed by.

A command holds its records (a diff, a memory plan, a scaling study, the machine's ceilings,
...) and prints them with `render_records(console, {key: record})`: each registered section
that reads one of them prints its view in its own terminal form (report/registry.py), in page
order, exactly as `render_sections` prints them from a run folder. No command has a rich table
of its own for a record a section shows.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from torchdoctor.report.adapters import build_view
from torchdoctor.report.load import read_input
from torchdoctor.report.model import ReportView
from torchdoctor.report.registry import JsonDict, RunRecords, Section, sections

#: `RunRecords` keys that are fields of their own rather than entries of `records`.
_ENV = "env"


def render_view(console: Console, view: ReportView, only: Collection[str] | None = None) -> None:
    """Print the sections of `view` that have a terminal form and something to show."""
    for section in sections():
        if section.terminal is None or (only is not None and section.name not in only):
            continue
        part = view.section(section.name)
        if part is not None:
            section.terminal(console, part)


def render_sections(
    console: Console, source: str | Path, only: Collection[str] | None = None
) -> None:
    """Print the sections of a run folder (or one record file); `only`: these sections."""
    render_view(console, build_view(read_input(Path(source))), only)


def _json(record: Any) -> JsonDict:
    """A record's JSON form (the contract the adapters read), or the JSON form as given."""
    return record.to_json_dict() if hasattr(record, "to_json_dict") else dict(record)


def held_records(records: Mapping[str, Any], source: Path | None = None) -> RunRecords:
    """What a command holds, as the loader would have read it from its run folder.

    `records`: record key (`RecordType.key`, or "env" for the fingerprint and ceilings) ->
    the record or its JSON form. `source`: the run folder, where the command made one.
    """
    found = RunRecords(source=source or Path("."), is_run_dir=source is not None)
    for key, record in records.items():
        if key == _ENV:
            found.env = {part: _json(value) for part, value in record.items()}
        else:
            found.records[key] = _json(record)
    return found


def sections_reading(keys: Collection[str]) -> list[Section]:
    """The sections, in page order, whose adapter reads one of the record keys `keys`."""
    return [s for s in sections() if set(s.reads) & set(keys)]


def render_records(
    console: Console,
    records: Mapping[str, Any],
    source: Path | None = None,
    only: Collection[str] | None = None,
) -> None:
    """Print a command's records: each section that reads one of them, in its terminal form.

    `only`: these sections of them (a command that prints the rest in its own lines).
    """
    found = held_records(records, source)
    for section in sections_reading(records):
        if section.terminal is None or (only is not None and section.name not in only):
            continue
        part = section.adapter(found)
        if part is not None:
            section.terminal(console, part)
