"""The report of each sample run folder, in every form, is byte for byte the golden one.

The goldens under tests/data/report_golden/ were written by golden_cases.py; a change to the
report's structure (the section registry, the templates) must leave every form as it was.
A change that means to alter the output rewrites them: `python tests/unit/report/golden_cases.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from golden_cases import (
    GOLDEN_DIR,
    LONE_CASES,
    MATPLOTLIB_FILE,
    RUN_CASES,
    SUFFIX,
    matplotlib_version,
    render_case,
    strip_svg,
    terminal_texts,
    without_charts,
)


def _golden(name: str) -> str:
    return (GOLDEN_DIR / f"{name}{SUFFIX}").read_text(encoding="utf-8")


def _same_matplotlib() -> bool:
    return (GOLDEN_DIR / MATPLOTLIB_FILE).read_text().strip() == str(matplotlib_version())


def _assert_same(name: str, text: str) -> None:
    expected = _golden(name)
    if name.endswith(".html") and not _same_matplotlib():
        # Another matplotlib draws other SVG; the page around the charts must still match.
        expected, text = strip_svg(expected), strip_svg(text)
    assert text == expected, f"{name} differs from its golden"


@pytest.mark.parametrize("case", [*RUN_CASES, *LONE_CASES])
def test_every_form_matches_its_golden(case: str, tmp_path: Path) -> None:
    for fmt, text in render_case(case, tmp_path).items():
        _assert_same(f"{case}.{fmt}", text)


def test_page_without_matplotlib_matches_its_golden(tmp_path: Path) -> None:
    _assert_same("demo_no_charts.html", without_charts(tmp_path))


def test_terminal_output_matches_its_golden(tmp_path: Path) -> None:
    texts = terminal_texts(tmp_path)
    assert set(texts) == {"tune", "diagnosis", "run", "analysis", "env", "shard_plan"}
    for name, text in texts.items():
        _assert_same(f"terminal_{name}.txt", text)


def test_the_goldens_are_complete() -> None:
    """Every golden file is one a test compares (a stale file would prove nothing)."""
    compared = {f"{c}.{f}" for c in [*RUN_CASES, *LONE_CASES] for f in ("html", "md", "json")}
    compared |= {"demo_no_charts.html"}
    terminals = ("tune", "diagnosis", "run", "analysis", "env", "shard_plan")
    compared |= {f"terminal_{n}.txt" for n in terminals}
    compared = {f"{name}{SUFFIX}" for name in compared} | {MATPLOTLIB_FILE}
    on_disk = {p.name for p in GOLDEN_DIR.iterdir() if p.is_file()}
    assert on_disk == compared
