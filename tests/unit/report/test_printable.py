"""Escape sequences from a record never reach the terminal or a report, and a `$` in an op
name is text on a chart, never mathtext."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchdoctor.cli.main import main
from torchdoctor.core.text import printable, printable_console
from torchdoctor.report.views import RooflineOp, RooflineSection

#: Clear the screen, set the window's title, a carriage return, a C1 CSI, a bidi override.
HOSTILE = "aten::mm\x1b[2J\x1b]0;owned\x07\r\x9b31m\u202eevil"
ESCAPES = ("\x1b", "\x07", "\r", "\x9b", "\u202e")


def test_printable_keeps_the_text_and_drops_every_control() -> None:
    assert printable(HOSTILE) == "aten::mm[2J]0;owned31mevil"
    assert printable("a\tb\nc — ü") == "a\tb\nc — ü"


def test_a_printable_console_strips_content_but_keeps_its_own_styling(tmp_path: Path) -> None:
    from rich.table import Table

    console = printable_console(record=True, force_terminal=True, width=80)
    table = Table("op")
    table.add_row(HOSTILE)
    console.print(table)
    console.print("[bold]done[/]")
    out = console.export_text(styles=True)
    assert "\x1b[1m" in out  # rich's own bold survives
    assert not any(e in out.replace("\x1b[1m", "").replace("\x1b[0m", "") for e in ESCAPES)


def _hostile_trace(tmp_path: Path) -> Path:
    shapes = {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]}
    events = [
        {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 100,
         "args": shapes}
        for ts, name in ((0, HOSTILE), (200, "$\\foo$"), (400, "a$b$c"))
    ]  # fmt: skip
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_analyze_prints_and_writes_no_escape_sequence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "run"
    assert main(["analyze", str(_hostile_trace(tmp_path)), "--out", str(out_dir)]) == 0
    printed = capsys.readouterr()
    assert "aten::mm" in printed.out
    for text in (printed.out, printed.err, *(p.read_text() for p in out_dir.glob("report.*"))):
        assert not any(e in text for e in ESCAPES)
    assert "0;owned31mevil" in (out_dir / "report.md").read_text()


def test_a_dollar_in_an_op_name_is_drawn_as_text() -> None:
    from torchdoctor.report.charts._svg import pyplot
    from torchdoctor.report.charts.roofline import roofline_chart

    plt = pyplot()
    if plt is None:
        pytest.skip("matplotlib is an optional extra")
    ops = [
        RooflineOp(name, 1, 100.0, 0.5, 1e6, intensity, 1e10, 1e9, "compute")
        for name, intensity in (("$\\foo$", 1.0), ("a$b$c", 10.0), ("x^2_$", 100.0))
    ]
    svg = roofline_chart(plt, RooflineSection(ops, {"float32": 1e11}, 1e10))
    assert svg is not None and "<svg" in svg
