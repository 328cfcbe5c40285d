"""A record type and a section registered here, and nowhere else, reach every form.

The fake stage below is what a new stage adds: a record class, its `RecordType`, an adapter
that returns a `Blocks` view, and a `Section` with no renderer of its own. The terminal, the
Markdown, the HTML page, the JSON bundle, "what is missing" and the disturbance warnings follow.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from io import StringIO
from pathlib import Path
from typing import Any, ClassVar

import pytest
from golden_cases import GOLDEN_DIR, SUFFIX, build, render_forms, strip_svg
from report_samples import (
    EVIL_OP,
    analysis_record,
    diagnosis_record,
    make_run,
    run_result_record,
    tune_record,
)
from rich.console import Console

from torchdoctor.core import rundir
from torchdoctor.core.errors import RecordError
from torchdoctor.core.load import MachineLoad
from torchdoctor.core.records import Record
from torchdoctor.report import format as fmt
from torchdoctor.report import registry
from torchdoctor.report.adapters._access import integer, items, mapping, num, text
from torchdoctor.report.blocks import Blocks, Table
from torchdoctor.report.load import RunRecords, read_input
from torchdoctor.report.registry import RecordType, Section, register_record, register_section
from torchdoctor.report.terminal.sections import render_records, render_sections
from torchdoctor.report.views import KeyValue

SCALE_FILE = "scale.json"


class ScaleResult(Record):
    """A scaling study's record, as a new stage would write it."""

    schema_name: ClassVar[str] = "scale_result"

    world_sizes: list[int]
    samples_per_s: list[float]
    efficiency: float
    note: str = ""
    machine_load: MachineLoad | None = None


def scale_view(found: RunRecords) -> Blocks | None:
    """The adapter: the record's JSON form -> facts and a table, formatted, nothing computed."""
    scale = found.records.get("scale")
    if scale is None:
        return None
    rates = [num({"v": v}, "v") for v in items(scale, "samples_per_s")]
    sizes = items(scale, "world_sizes")
    rows = [[fmt.number(n), fmt.rate(r)] for n, r in zip(sizes, rates, strict=True)]
    notes = [text(scale, "note") or ""] if text(scale, "note") else []
    load = mapping(scale, "machine_load")
    return Blocks(
        title="Scaling",
        facts=[
            KeyValue("largest world", fmt.number(max(items(scale, "world_sizes"), default=None))),
            KeyValue("efficiency", fmt.percent(num(scale, "efficiency"))),
            KeyValue("cores", fmt.number(integer(load, "cores"))),
        ],
        tables=[Table(header=["ranks", "throughput"], rows=rows, title="Throughput per world")],
        notes=notes,
    )


SCALE = RecordType(
    key="scale",
    file=SCALE_FILE,
    module=__name__,
    cls="ScaleResult",
    schema="scale_result",
    feeds="scaling efficiency",
    written_by=("tune",),
    warns_as="scale",
)
SCALING = Section(name="scaling", reads=("scale",), adapter=scale_view, order=85, markdown_order=55)


@pytest.fixture
def scale_stage(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The built-in registry plus the fake stage, for one test."""
    registry.sections()  # the built-ins, registered before the copy
    monkeypatch.setattr(registry, "_RECORDS", dict(registry._RECORDS))
    monkeypatch.setattr(registry, "_SECTIONS", dict(registry._SECTIONS))
    register_record(SCALE)
    register_section(SCALING)
    yield


def _scale_record(*, disturbed: bool = False) -> ScaleResult:
    load = MachineLoad(
        interval_s=1.0,
        cores=4,
        own_cpu_s=1.0,
        other_cpu_s=3.0,
        other_cores=3.0,
        disturbed=disturbed,
        warning="other work kept 3 of 4 cores busy" if disturbed else None,
    )
    return ScaleResult(
        world_sizes=[1, 2, 4],
        samples_per_s=[100.0, 190.0, 360.0],
        efficiency=0.9,
        note=f"rank 3 ran {EVIL_OP}",
        machine_load=load,
    )


def _scale_run(root: Path, *, disturbed: bool = False) -> Path:
    run_dir = make_run(root)
    _scale_record(disturbed=disturbed).write(run_dir / SCALE_FILE)
    return run_dir


@pytest.mark.usefixtures("scale_stage")
def test_a_registered_section_appears_in_every_form(tmp_path: Path) -> None:
    run_dir = _scale_run(tmp_path)
    forms = render_forms(run_dir, tmp_path)

    html = forms["html"]
    assert '<section id="scaling">\n  <h2>Scaling</h2>' in html
    assert "<td>efficiency</td><td>90.0%</td>" in html
    assert "<h3>Throughput per world</h3>" in html and "<td>4</td><td>360.0 samples/s</td>" in html
    assert "rank 3 ran &lt;script&gt;alert(1)&lt;/script&gt;" in html  # escaped like the rest
    # In its place on the page: after the environment, before how to reproduce.
    place = [html.index(f'id="{name}"') for name in ("environment", "scaling", "reproduce")]
    assert place == sorted(place)

    md = forms["md"]
    assert "## Scaling\n\n|  |  |\n|---|---|\n| largest world | 4 |\n| efficiency | 90.0% |" in md
    table = "| ranks | throughput |\n|---|---|\n| 1 | 100.0 samples/s |"
    assert f"### Throughput per world\n\n{table}" in md
    assert "rank 3 ran &lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert md.index("## Pareto front") < md.index("## Scaling") < md.index("## How to reproduce")

    out = StringIO()
    render_sections(Console(file=out, width=100, color_system=None), run_dir)
    terminal = out.getvalue()
    assert "Scaling" in terminal and "efficiency" in terminal and "90.0%" in terminal
    assert "Throughput per world" in terminal and "360.0 samples/s" in terminal
    assert f"note: rank 3 ran {EVIL_OP}" in terminal  # printed as text, not taken as markup
    # In its place on the terminal too: after the environment, before how to reproduce.
    place = [terminal.index(s) for s in ("Ceilings of cpu", "Scaling", "How to reproduce")]
    assert place == sorted(place)

    bundle = json.loads(forms["json"])
    assert bundle["records"]["scale"] == _scale_record().to_json_dict()


@pytest.mark.usefixtures("scale_stage")
def test_a_registered_record_is_read_alone_and_validated(tmp_path: Path) -> None:
    run_dir = _scale_run(tmp_path)
    found = read_input(run_dir / SCALE_FILE)
    assert not found.is_run_dir and found.records["scale"]["efficiency"] == 0.9
    data = json.loads((run_dir / SCALE_FILE).read_text())
    data["efficiency"] = "high"
    (run_dir / SCALE_FILE).write_text(json.dumps(data))
    with pytest.raises(RecordError, match="efficiency"):
        read_input(run_dir)


@pytest.mark.usefixtures("scale_stage")
def test_a_registered_record_is_missing_from_the_runs_that_write_it(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, complete=False, kind="tune")
    md = render_forms(run_dir, tmp_path)["md"]
    assert "- scale.json (scaling efficiency): the run never finished" in md


@pytest.mark.usefixtures("scale_stage")
def test_a_registered_records_disturbance_is_warned_first(tmp_path: Path) -> None:
    md = render_forms(_scale_run(tmp_path, disturbed=True), tmp_path)["md"]
    assert "> **Warning:** scale: other work kept 3 of 4 cores busy" in md


@pytest.mark.usefixtures("scale_stage")
def test_a_registered_section_without_its_record_changes_nothing(tmp_path: Path) -> None:
    forms = render_forms(build("demo", tmp_path), tmp_path)
    for fmt_name in ("md", "json"):
        assert forms[fmt_name] == (GOLDEN_DIR / f"demo.{fmt_name}{SUFFIX}").read_text()
    # On the page, each section keeps its place with a blank line of the source, even when
    # it has nothing to show (as the built-in Pareto front and loss parity do).
    golden = strip_svg((GOLDEN_DIR / f"demo.html{SUFFIX}").read_text())
    place = '</section>\n\n<section id="reproduce">'
    assert golden.count(place) == 1
    expected = golden.replace(place, '</section>\n\n\n<section id="reproduce">')
    assert strip_svg(forms["html"]) == expected


def test_registering_a_second_section_of_the_same_name_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry.sections()
    monkeypatch.setattr(registry, "_SECTIONS", dict(registry._SECTIONS))
    with pytest.raises(ValueError, match="'ladder' is registered already"):
        register_section(
            Section(name="ladder", reads=(), adapter=scale_view, order=1, markdown_order=None)
        )


def test_every_section_reads_known_records() -> None:
    keys = {r.key for r in registry.record_types()} | {"env", "trials", "manifest"}
    for section in registry.sections():
        assert section.reads and set(section.reads) <= keys, section.name
    assert rundir.TUNE in {r.file for r in registry.record_types()}


def _without_terminal_form() -> list[str]:
    """The registered sections that read a record and have no terminal form."""
    keys = {r.key for r in registry.record_types()} | {"env", "trials", "manifest"}
    return [s.name for s in registry.sections() if set(s.reads) & keys and s.terminal is None]


def test_every_section_with_a_record_prints_on_a_terminal() -> None:
    assert _without_terminal_form() == []


@pytest.mark.usefixtures("scale_stage")
def test_a_section_with_a_record_and_no_terminal_form_is_named() -> None:
    register_section(replace(SCALING, name="scaling_silent", terminal=None))
    assert _without_terminal_form() == ["scaling_silent"]


def test_a_section_printed_within_another_is_printed_by_one_the_walk_prints() -> None:
    by_name = {s.name: s for s in registry.sections()}
    for section in registry.sections():
        if section.within is not None:
            owner = by_name[section.within]
            assert owner.terminal is not None and owner.within is None, section.name


def _printed(print_to: Any) -> str:
    out = StringIO()
    print_to(Console(file=out, width=100, color_system=None))
    return out.getvalue()


def test_a_commands_records_print_as_their_record_files_do(tmp_path: Path) -> None:
    """One walk: what a command prints of the records it holds is what the sections print of
    the same records read back from their files."""
    run_dir = make_run(tmp_path)
    run_result_record().write(run_dir / rundir.RUN_RESULT)
    held = {
        rundir.TUNE: ("tune", tune_record(run_dir)),
        rundir.DIAGNOSIS: ("diagnosis", diagnosis_record()),
        rundir.ANALYSIS: ("analysis", analysis_record()),
        rundir.RUN_RESULT: ("run_result", run_result_record()),
    }
    for file, (key, record) in held.items():
        printed = _printed(lambda c, key=key, record=record: render_records(c, {key: record}))
        read_back = _printed(lambda c, file=file: render_sections(c, run_dir / file))
        assert printed and printed == read_back, file
