"""The diff section's view: a `RunDiff`'s JSON form as facts and tables of display strings."""

from __future__ import annotations

from typing import Any

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import items, mapping, num, pair, text
from torchdoctor.report.blocks import Blocks, Table
from torchdoctor.report.load import RunRecords
from torchdoctor.report.views import KeyValue

CHANGE_HEADER = ["", "A", "B", "change", "95% interval", "of step", "significant"]
STATUS_WORDS = {"appeared": "appeared", "went_away": "went away", "stayed": "stayed"}


def _amount(value: float | None, unit: str) -> str:
    return fmt.rate(value) if unit == "samples/s" else fmt.seconds(value)


def _signed(value: float | None, unit: str) -> str:
    if value is None:
        return fmt.NA
    sign = "+" if value > 0 else "-" if value < 0 else "±"
    return sign + _amount(abs(value), unit)


def _row(change: dict[str, Any]) -> list[str]:
    unit = text(change, "unit") or "s"
    ci = pair(change.get("ci"))
    return [
        text(change, "name") or "",
        _amount(num(change, "a"), unit),
        _amount(num(change, "b"), unit),
        _signed(num(change, "shift"), unit),
        f"[{_signed(ci[0], unit)}, {_signed(ci[1], unit)}]" if ci else "no interval",
        fmt.percent(num(change, "share_of_step")),
        "yes" if change.get("significant") else "no",
    ]


def _table(title: str, changes: list[Any]) -> list[Table]:
    rows = [_row(c) for c in changes if isinstance(c, dict)]
    return [Table(header=CHANGE_HEADER, rows=rows, title=title)] if rows else []


def diff_view(found: RunRecords) -> Blocks | None:
    diff = found.records.get("diff")
    return diff_view_of(diff) if diff is not None else None


def diff_view_of(diff: dict[str, Any]) -> Blocks:
    """The view of one `RunDiff`'s JSON form (what `torchdoctor diff` prints)."""
    step = mapping(diff, "step")
    primary = items(diff, "primary")
    facts = [
        KeyValue("A", text(diff, "a") or fmt.NA),
        KeyValue("B", text(diff, "b") or fmt.NA),
        KeyValue("verdict", text(diff, "verdict") or fmt.NA),
    ]
    if step:
        facts.append(KeyValue("median step", " -> ".join(_row(step)[1:3])))
    if len(primary) == 2 and any(primary):
        facts.append(
            KeyValue("primary bottleneck", f"{primary[0] or fmt.NA} -> {primary[1] or fmt.NA}")
        )
    phase_title = "Phases (trace breakdown)" if text(diff, "phase_source") == "trace" else "Phases"
    tables = [
        *_table("Step", [step] if step else []),
        *_table(phase_title, items(diff, "phases")),
        *_table("Ops that moved most (self time per step)", items(diff, "ops")),
        *_table("Kernels that moved most (device time per step)", items(diff, "kernels")),
        *_table("Throughput", items(diff, "throughput")),
    ]
    findings = [
        [
            text(f, "rule_id") or "",
            text(f, "title") or "",
            STATUS_WORDS.get(text(f, "status") or "", ""),
            fmt.percent(num(f, "share_a")),
            fmt.percent(num(f, "share_b")),
        ]
        for f in items(diff, "findings")
        if isinstance(f, dict)
    ]
    if findings:
        tables.append(
            Table(
                header=["rule", "finding", "", "share A", "share B"],
                rows=findings,
                title="Findings",
            )
        )
    recipe = [
        [text(r, "knob") or "", fmt.value_text(r.get("a")), fmt.value_text(r.get("b"))]
        for r in items(diff, "recipe")
        if isinstance(r, dict)
    ]
    if recipe:
        tables.append(Table(header=["knob", "A", "B"], rows=recipe, title="Best recipes differ"))
    share = num(diff, "min_step_share")
    notes = [str(n) for n in items(diff, "notes")]
    notes.append(
        "significant: the interval of the median shift excludes no change and the shift is at "
        f"least {fmt.percent(share, 0)} of A's median step (throughput: of A's rate); the "
        "intervals cover the spread between steps within each run, not between processes"
    )
    return Blocks(title="What changed", facts=facts, tables=tables, notes=notes)
