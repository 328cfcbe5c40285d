"""Open a generated report in real headless Chromium: no console errors, no script ran, every
chart drawn, hostile strings shown as text. Saves a screenshot next to the report.

Chromium comes from the system package (`/usr/bin/chromium`, installed by `.ci/run`) and is
driven by playwright-python; no browser is downloaded. With TORCHDOCTOR_REQUIRE_BROWSER=1 (set
by CI) a missing Chromium fails the test instead of skipping it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from torchdoctor.report import render_report

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
EXPECTED_CHARTS = {"steps", "timeline", "roofline", "ladder", "pareto", "parity"}


def _sample_run() -> ModuleType:
    path = Path(__file__).parents[1] / "unit" / "report" / "report_samples.py"
    spec = importlib.util.spec_from_file_location("report_sample_run", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _require_browser() -> None:
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    if importlib.util.find_spec("playwright") is None:
        missing.append("playwright (pip install -e '.[dev]')")
    if not missing:
        return
    reason = "browser test needs " + " and ".join(missing)
    if os.environ.get("TORCHDOCTOR_REQUIRE_BROWSER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def test_report_in_headless_chromium(tmp_path: Path) -> None:
    _require_browser()
    from playwright.sync_api import sync_playwright

    sample = _sample_run()
    report = render_report(sample.make_run(tmp_path), "html")
    console_errors: list[str] = []
    page_errors: list[str] = []
    dialogs: list[str] = []
    requests: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 800})
            page.on(
                "console",
                lambda m: console_errors.append(m.text) if m.type == "error" else None,
            )
            page.on("pageerror", lambda e: page_errors.append(str(e)))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(report.as_uri(), wait_until="load")

            charts = page.eval_on_selector_all(
                "figure.chart",
                """figs => figs.map(f => {
                    const svg = f.querySelector('svg');
                    const box = svg ? svg.getBoundingClientRect() : null;
                    return {name: f.dataset.chart,
                            shapes: svg ? svg.querySelectorAll('path, rect, use').length : 0,
                            width: box ? box.width : 0, height: box ? box.height : 0};
                })""",
            )
            body_text = page.inner_text("body")
            scripts = page.eval_on_selector_all("script", "s => s.length")
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        finally:
            browser.close()

    assert console_errors == [] and page_errors == []
    assert dialogs == [], f"a script ran in the report: {dialogs}"
    assert scripts == 0
    # Self-contained: the page fetched nothing but itself.
    assert [u for u in requests if u != report.as_uri()] == []
    assert {c["name"] for c in charts} == EXPECTED_CHARTS
    for chart in charts:
        assert chart["shapes"] > 0 and chart["width"] > 0 and chart["height"] > 0, chart
    assert sample.EVIL_OP in body_text  # shown as text, not run
    assert sample.EVIL_SCRIPT in body_text
    assert (tmp_path / "report.png").stat().st_size > 0
