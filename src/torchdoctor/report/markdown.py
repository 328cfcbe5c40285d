"""The same content as Markdown, for pull requests and CI logs (tables, no charts).

Strings from users or traces are escaped so they cannot break a table or inject markup: pipes,
backticks, HTML angle brackets and the other Markdown control characters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from torchdoctor.report import format as fmt
from torchdoctor.report.model import KeyValue, ReportView

FENCE = "```"
ALT_FENCE = "'''"
#: Characters that start emphasis, code, links, tables or strikethrough anywhere in a line.
#: Block markers (#, -, +, 1.) only act at a line start, which an escaped value never is.
_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md(text: object) -> str:
    """Escape a string for a Markdown table cell or paragraph."""
    s = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = s.replace("\r", " ").replace("\n", " ")
    return _SPECIAL.sub(r"\\\1", s)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(md(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _kv(rows: Sequence[KeyValue]) -> list[str]:
    return _table(["", ""], [(r.label, r.value) for r in rows]) if rows else []


def _head(v: ReportView) -> list[str]:
    h = v.header
    out = [f"# {md(h.title)}", "", f"Status: **{md(h.status)}**"]
    out += [f"Error: {md(h.error)}"] if h.error else []
    out.append("")
    out += [f"> **Warning:** {md(w)}" for w in v.warnings]
    out += [""] if v.warnings else []
    if v.missing:
        out += ["## What is missing", ""]
        out += [f"- {md(r.file)} ({md(r.section)}): {md(r.why)}." for r in v.missing]
        out.append("")
    return out


def _verdict(v: ReportView) -> list[str]:
    out = ["## Verdict", ""]
    if v.verdict:
        d = v.verdict
        out += [f"> {md(d.verdict or 'No verdict recorded.')}", ""]
        out += _kv(
            [
                KeyValue("primary bottleneck", d.primary_bottleneck or fmt.NA),
                KeyValue("regime", d.regime or fmt.NA),
                KeyValue("confidence", fmt.percent(d.confidence, 0)),
                *d.facts,
                *d.regime_evidence,
            ]
        )
    if v.ladder:
        lad = v.ladder
        out += [
            f"Tuned **{md(lad.workload)}**: {md(fmt.rate(lad.baseline_samples_per_s))} → "
            f"{md(fmt.rate(lad.best_samples_per_s))}, **{md(fmt.speedup(lad.speedup))}** "
            f"(CI {md(fmt.interval(lad.ci_low, lad.ci_high))})",
            "",
        ]
    if v.env:
        out += ["## Environment and measured ceilings", "", *_kv(v.env.facts)]
    return out


def _findings(v: ReportView) -> list[str]:
    out: list[str] = []
    if v.findings:
        out += ["## Findings, ranked by bound on gain", ""]
        for f in v.findings:
            out += [
                f"### {md(f.title)} ({md(f.rule_id)}, {md(f.severity)}, at most "
                f"{md(fmt.speedup(f.bound))} faster)",
                "",
                *([md(f.summary), ""] if f.summary else []),
                *_kv(f.evidence),
            ]
            out += [f"Prescription: {md(f.prescription)}", ""] if f.prescription else []
    return out


def _breakdown(v: ReportView) -> list[str]:
    out: list[str] = []
    if v.steps:
        out += ["## Where each step's time goes", ""]
        phases = sorted({k for b in v.steps.bars for k in b.fractions})
        rows = [[b.label, *(fmt.percent(b.fractions.get(p)) for p in phases)] for b in v.steps.bars]
        out += _table(["source", *phases], rows) if rows else []
        out += _kv(v.steps.facts)
    if v.timeline:
        out += ["### Trace timeline", "", *_kv(v.timeline.device)]
        out += _kv([KeyValue(k, fmt.pct_value(p)) for k, p in v.timeline.step_breakdown.items()])
        out += _kv(v.timeline.facts)
    if v.roofline and v.roofline.ops:
        out += ["## Roofline (top ops)", ""]
        out += _table(
            ["op", "calls", "time", "FLOP/byte", "achieved", "bound"],
            [
                (
                    o.name,
                    fmt.number(o.count),
                    fmt.micros(o.time_us),
                    fmt.number(o.intensity),
                    fmt.flops(o.achieved_flops_per_s),
                    o.bound or fmt.NA,
                )
                for o in v.roofline.ops
            ],
        )
    return out


def _tune(v: ReportView) -> list[str]:
    out: list[str] = []
    if v.ladder:
        out += ["## Tuning ladder", ""]
        out += _table(
            ["step", "change", "throughput", "speedup", "CI", "peak memory", "verdict"],
            [
                (
                    r.step,
                    r.change,
                    fmt.rate(r.samples_per_s),
                    fmt.speedup(r.speedup),
                    fmt.interval(r.ci_low, r.ci_high),
                    fmt.nbytes(r.peak_memory_bytes),
                    r.verdict,
                )
                for r in v.ladder.rungs
            ],
        )
        if v.ladder.rejected:
            out += ["### Rejected changes", ""]
            out += _table(
                ["change", "status", "speedup vs best", "why"],
                [(r.change, r.status, fmt.speedup(r.speedup), r.reason) for r in v.ladder.rejected],
            )
    if v.trials:
        out += ["### Trials", ""]
        out += _table(
            ["trial", "change", "status", "decision", "throughput", "reason"],
            [
                (t.key, t.change, t.status, t.decision, fmt.rate(t.samples_per_s), t.reason)
                for t in v.trials
            ],
        )
    if v.pareto:
        out += ["## Pareto front", ""]
        out += _table(
            ["recipe", "throughput", "peak memory"],
            [
                (p.recipe, fmt.rate(p.samples_per_s), fmt.nbytes(p.peak_memory_bytes))
                for p in v.pareto
            ],
        )
    if v.reproduce:
        commands = [c.replace(FENCE, ALT_FENCE) for c in v.reproduce.commands]
        out += ["## How to reproduce", "", "```sh", *commands, "```", ""]
        if v.reproduce.recipe_code:
            # Inside a fenced block nothing is markup; only a fence could end it early.
            code = v.reproduce.recipe_code.replace(FENCE, ALT_FENCE)
            out += ["```python", code.rstrip("\n"), "```", ""]
    return out


def render_markdown(view: ReportView) -> str:
    # Verdict and cure first, then the evidence: what a reader of a pull request wants.
    parts = [_head, _verdict, _findings, _tune, _breakdown]
    return "\n".join(line for part in parts for line in part(view)).rstrip() + "\n"
