"""The HTML page: one self-contained file (inline CSS and SVG, no script, no fetch).

jinja2 autoescaping is on for every template, so any string from a user or a trace (script
names, op names, error messages, recipe values) reaches the page as text. The only markup
inserted unescaped is the SVG matplotlib writes, which escapes its own text.
"""

from __future__ import annotations

from functools import cache

import jinja2

from torchdoctor.core.steps import PHASES
from torchdoctor.report import format as fmt
from torchdoctor.report.charts import Charts
from torchdoctor.report.model import KeyValue, ReportView


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("torchdoctor.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(fmt=fmt, pairs=_pairs, pct_rows=_pct_rows)
    return env


def _pairs(rows: list[KeyValue]) -> list[tuple[str, str]]:
    return [(r.label, r.value) for r in rows]


def _pct_rows(values: dict[str, float]) -> list[tuple[str, str]]:
    return [(k, fmt.pct_value(v)) for k, v in values.items()]


def _phases(view: ReportView) -> list[str]:
    bars = view.steps.bars if view.steps else []
    seen = {k for b in bars for k in b.fractions}
    return [p for p in PHASES if p in seen] + sorted(seen - set(PHASES))


def render_html(view: ReportView, charts: Charts) -> str:
    template = _environment().get_template("report.html.j2")
    return template.render(v=view, charts=charts, phases=_phases(view))
