"""What the report renders, registered by record type: the records a run folder holds, and the
sections that show them in each form.

A stage that writes a new record adds an adapter and a section, and nothing else in `report/`
changes:

1. report/adapters/<stage>.py: a function from the records (`RunRecords`) to the section's
   view model. A `Blocks` (report/blocks.py: facts, tables, notes of display strings) needs
   no renderer of its own: its terminal, Markdown and HTML forms are written once, for every
   section.
2. report/sections/<stage>.py (every module there is imported): `register_record` of its
   `RecordType` (the file in the run folder, the record class that validates it, the run
   kinds that write it, what its absence means) and `register_section` of its `Section`
   (the records it reads, the adapter, its place on the page and in the Markdown, and any
   forms of its own: a Markdown function, a template fragment, a terminal printer, charts).

The loader reads every registered record type, `build_view` runs every section's adapter, and
the page, the Markdown and the terminal walk the sections in their order (a command prints the
records it holds by the same walk: report/terminal/sections.py). The built-in record
types are in report/records.py; the registry imports them and report/sections/ the first time
it is read.

The report computes nothing: an adapter copies and formats what a record holds.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from rich.console import Console

#: The generic forms of a `Blocks` view (report/blocks.py), the default of every section.
BLOCKS_HTML: Final = "sections/blocks.html.j2"
_BUILTINS: Final = ("torchdoctor.report.records", "torchdoctor.report.sections")

JsonDict = dict[str, Any]


@dataclass(frozen=True)
class RecordType:
    """One record file of a run folder, read and validated by its own record class.

    `module` and `cls` name the class rather than hold it: a stage's module may import torch,
    and a stage that is not installed in this build is read by its JSON header only.
    """

    key: str
    """Where the record's JSON form is found in `RunRecords.records` (and the JSON bundle)."""
    file: str
    """The file's name in the run folder."""
    module: str
    cls: str
    schema: str
    """Schema id the record is written with, without the prefix (to recognise a lone file)."""
    feeds: str = ""
    """The sections it feeds, in words ("What is missing" names them when it is absent)."""
    written_by: tuple[str, ...] = ()
    """The run kinds (manifest `kind`) that write it when they complete."""
    warns_as: str | None = None
    """The label of its `machine_load` warning at the top of the report (None: no warning)."""
    instead_of: str | None = None
    """The key of the record a run of the same kind writes in this one's place (`memory` writes
    memory.json, `memory --nproc` shard_plan.json): neither is missing where the other is."""
    strict: bool = True
    """False: a record the page only draws a detail from (a setting of the study), left out
    when it does not validate rather than failing the report."""


@dataclass
class RunRecords:
    """Everything found in a run folder, as validated JSON forms keyed by `RecordType.key`."""

    source: Path
    manifest: JsonDict | None = None
    records: dict[str, JsonDict] = field(default_factory=dict)
    env: dict[str, JsonDict] = field(default_factory=dict)
    trials: list[JsonDict] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """Other artifacts present in the folder (trace, snippets) for the reproduce section."""
    is_run_dir: bool = True
    recipe_snippet: str | None = None
    """The tuner's own best-recipe snippet, shown verbatim in "how to reproduce"."""


# A section's forms, given the section's view (None where its records are absent).
MarkdownForm = Callable[[Any], list[str]]
TerminalForm = Callable[["Console", Any], None]
ChartsForm = Callable[[Any, Any], dict[str, str | None]]
"""(matplotlib.pyplot, the view) -> chart name -> SVG (None: nothing to draw)."""


def _blocks_markdown(view: Any) -> list[str]:
    from torchdoctor.report.blocks import blocks_markdown

    return blocks_markdown(view)


def _blocks_terminal(console: Console, view: Any) -> None:
    from torchdoctor.report.blocks import blocks_terminal

    blocks_terminal(console, view)


@dataclass(frozen=True)
class Section:
    """One section of the report: the records it reads, its adapter, and its forms.

    `adapter` gets everything the loader found and returns the section's view model (None:
    nothing to show). Each form gets that view: `markdown` returns the section's lines,
    `html` names a template fragment under report/templates/ (rendered with the view as `s`,
    the section as `section`, and the page's `charts`), `terminal` prints it (or the view
    `terminal_view` returns), `charts` draws its charts for the page. The defaults render a
    `Blocks` view.
    """

    name: str
    """The section's id: its key in `ReportView.sections` and its id on the HTML page."""
    reads: tuple[str, ...]
    """The record keys (`RecordType.key`, or "env", "trials", "manifest") the adapter reads."""
    adapter: Callable[[RunRecords], Any]
    order: int
    """Place on the HTML page and on the terminal (ascending)."""
    markdown_order: int | None
    """Place in the Markdown (None: the section has no Markdown form, e.g. a chart alone)."""
    markdown: MarkdownForm = _blocks_markdown
    html: str = BLOCKS_HTML
    terminal: TerminalForm | None = _blocks_terminal
    """Prints the section on a terminal: a command prints its records by walking the sections
    that read them (report/terminal/sections.py), as the page and the Markdown do. None: the
    section has nothing a terminal can show (tests/unit/report/test_section_registry.py fails
    on a section with a record and no terminal form)."""
    terminal_view: Callable[[RunRecords], Any] | None = None
    """The view the terminal form gets, where a terminal shows the records in a shape of its
    own (a command's compact tables of the typed record); None: the adapter's view."""
    within: str | None = None
    """The section whose terminal form prints this one inside its own, in the order a person
    reads them on a terminal (the tune's result prints its ladder before its closing lines);
    None: printed in its own place of the walk."""
    charts: ChartsForm | None = None


_RECORDS: dict[str, RecordType] = {}
_SECTIONS: dict[str, Section] = {}
_loaded = False


def _load_builtins() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in _BUILTINS:
            importlib.import_module(module)


def register_record(record: RecordType) -> RecordType:
    """Add a record type; the loader reads it from every run folder (in registration order)."""
    if record.key in _RECORDS and _RECORDS[record.key] != record:
        raise ValueError(f"record type {record.key!r} is registered already")
    _RECORDS[record.key] = record
    return record


def register_section(section: Section) -> Section:
    """Add a section; every form of the report shows it from then on."""
    if section.name in _SECTIONS and _SECTIONS[section.name] != section:
        raise ValueError(f"section {section.name!r} is registered already")
    _SECTIONS[section.name] = section
    return section


def record_types() -> list[RecordType]:
    """The registered record types, in registration order."""
    _load_builtins()
    return list(_RECORDS.values())


def sections() -> list[Section]:
    """The registered sections in page order."""
    _load_builtins()
    return sorted(_SECTIONS.values(), key=lambda s: s.order)


def markdown_sections() -> list[Section]:
    """The sections that have a Markdown form, in Markdown order."""
    placed = [(s.markdown_order, s) for s in sections() if s.markdown_order is not None]
    return [s for _, s in sorted(placed, key=lambda p: p[0])]
