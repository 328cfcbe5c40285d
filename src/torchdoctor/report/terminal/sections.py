"""The report's sections on a terminal: the one walk every command's results are printed by.

A command holds its records (a diff, a memory plan, a scaling study, the machine's ceilings,
...) and prints them with `render_records(console, {key: record})`: each registered section
that reads one of them prints its view in its own terminal form (report/registry.py), in page
order, exactly as `render_sections` prints them from a run folder. What has no section
(`profile`'s capture, `bench`, a script's run, `workloads`) is printed by its own module.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from torchdoctor.report.load import read_input
from torchdoctor.report.registry import JsonDict, RunRecords, sections

#: `RunRecords` keys that are fields of their own rather than entries of `records`.
_ENV = "env"


def render_found(console: Console, found: RunRecords, only: Collection[str] | None = None) -> None:
    """Print each section of `found` that has something to show, in its terminal form.

    A section printed `within` another's form is left to it; `only`: these sections, each
    on its own unless the section it is printed within is asked for too.
    """
    for section in sections():
        if only is None and section.within is not None:
            continue
        if only is not None and (section.name not in only or section.within in only):
            continue
        part = (section.terminal_view or section.adapter)(found)
        if part is not None and section.terminal is not None:
            section.terminal(console, part)


def render_sections(
    console: Console, source: str | Path, only: Collection[str] | None = None
) -> None:
    """Print the sections of a run folder (or one record file); `only`: these sections."""
    render_found(console, read_input(Path(source)), only)


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


def render_records(
    console: Console,
    records: Mapping[str, Any],
    source: Path | None = None,
    only: Collection[str] | None = None,
) -> None:
    """Print a command's records: the sections that read them, each in its terminal form.

    A section whose records are not among `records` has nothing to show and prints nothing,
    so the walk is the one `render_sections` makes over a run folder. `only`: these sections.
    """
    render_found(console, held_records(records, source), only)
