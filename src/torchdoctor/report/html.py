"""The HTML page: one self-contained file (inline CSS and SVG, no script, no fetch).

The page template (templates/report.html.j2) holds the head, the header and what is missing;
each registered section renders its own fragment (`Section.html`, under templates/sections/)
with its view as `s`, and the page shows them in `Section.order`, each after a blank line.

jinja2 autoescaping is on for every template, so any string from a user or a trace (script
names, op names, error messages, recipe values) reaches the page as text. The only markup
inserted unescaped is the SVG matplotlib writes, which escapes its own text, and the sections'
fragments, which are autoescaped themselves.
"""

from __future__ import annotations

from functools import cache

import jinja2
from markupsafe import Markup

from torchdoctor.core.text import printable
from torchdoctor.report import format as fmt
from torchdoctor.report.charts import Charts
from torchdoctor.report.registry import sections
from torchdoctor.report.views import KeyValue, ReportView


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("torchdoctor.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        # Every {{ value }} without control characters (core/text.py), escaped after.
        finalize=_printable,
    )
    env.globals.update(fmt=fmt, pairs=_pairs, pct_rows=_pct_rows)
    return env


def _printable(value: object) -> object:
    if isinstance(value, Markup):  # a fragment already escaped: still markup after
        return Markup(printable(str(value)))
    return printable(value) if isinstance(value, str) else value


def _pairs(rows: list[KeyValue]) -> list[tuple[str, str]]:
    return [(r.label, r.value) for r in rows]


def _pct_rows(values: dict[str, float]) -> list[tuple[str, str]]:
    return [(k, fmt.pct_value(v)) for k, v in values.items()]


def _body(view: ReportView, charts: Charts) -> Markup:
    """Every section's fragment in page order; a section with nothing to show is left out
    (its blank line stays, so the page reads the same whichever sections it holds)."""
    env = _environment()
    body = ""
    for section in sections():
        template = env.get_template(section.html)
        part = template.render(s=view.section(section.name), section=section, charts=charts)
        part = part.strip("\n")
        body += f"\n{part}\n" if part else "\n"
    return Markup(body)  # each fragment was autoescaped as it rendered


def render_html(view: ReportView, charts: Charts) -> str:
    template = _environment().get_template("report.html.j2")
    return template.render(v=view, charts=charts, body=_body(view, charts))
