"""What a person reads on a terminal lives in report/terminal (docs/DESIGN.md): the CLI
modules build no rich tables of their own, and measure/ (left of report/) never imports it."""

from __future__ import annotations

import ast
from pathlib import Path

import torchdoctor

SRC = Path(torchdoctor.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_cli_modules_build_no_tables() -> None:
    offenders = sorted(
        path.name for path in (SRC / "cli").glob("*.py") if "rich.table" in _imports(path)
    )
    assert offenders == []


def test_measure_imports_neither_report_nor_rich() -> None:
    offenders = sorted(
        str(path.relative_to(SRC))
        for path in (SRC / "measure").rglob("*.py")
        if any(name.startswith("torchdoctor.report") for name in _imports(path))
        or any(name.startswith("rich") for name in _imports(path))
    )
    assert offenders == []


def test_terminal_renderers_are_in_report() -> None:
    modules = {p.stem for p in (SRC / "report" / "terminal").glob("*.py")}
    assert {"analysis", "bench", "diagnosis", "env", "profile", "run", "steps", "tune"} <= modules
    # A section's form is printed by the walk: no module re-renders one section on its own.
    assert not {"diff", "memory", "scale"} & modules


def test_tune_and_diagnosis_render_on_a_terminal(tmp_path: Path) -> None:
    from io import StringIO

    from report_samples import diagnosis_record, tune_record
    from rich.console import Console

    from torchdoctor.report.terminal.diagnosis import render_diagnosis
    from torchdoctor.report.terminal.tune import render_result

    out = StringIO()
    console = Console(file=out, width=120)
    result = tune_record(tmp_path)
    render_result(result, console)
    d = diagnosis_record()
    render_diagnosis(d, console)
    text = out.getvalue()
    assert f"Ladder: {result.workload}" in text and f"{result.speedup:.2f}x" in text
    assert f"Primary bottleneck: {d.primary_bottleneck}" in text
