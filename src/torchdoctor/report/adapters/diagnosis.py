"""diagnosis.json (Diagnosis) -> the verdict and the findings."""

from __future__ import annotations

from typing import Any

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import (
    JsonDict,
    get,
    integer,
    items,
    mapping,
    num,
    text,
)
from torchdoctor.report.views import FindingView, KeyValue, VerdictSection


def _evidence(value: Any) -> list[KeyValue]:
    """Evidence as rows, whatever shape the rule recorded: a mapping, a list or a sentence."""
    if isinstance(value, dict):
        return [
            KeyValue(fmt.evidence_label(str(k)), fmt.evidence_value(str(k), v))
            for k, v in value.items()
        ]
    if isinstance(value, list):
        rows: list[KeyValue] = []
        for entry in value:
            if isinstance(entry, dict) and "name" in entry:
                name = str(entry["name"])
                rows.append(KeyValue(name, fmt.evidence_value(name, entry.get("value"))))
            else:
                rows.append(KeyValue("", fmt.number(entry)))
        return rows
    return [] if value is None else [KeyValue("", fmt.number(value))]


def _prescription(value: Any) -> tuple[str, list[str]]:
    """(the change in words, the knobs it names)."""
    if isinstance(value, dict):
        words = text(value, "code_change") or ""
        site = text(value, "site")
        if site:
            words = f"{words} (at {site})"
        knobs_value = get(value, "knobs")
        if isinstance(knobs_value, dict):
            knobs = [f"{k}={v}" for k, v in knobs_value.items()]
        elif isinstance(knobs_value, list):
            knobs = [fmt.number(k) if not isinstance(k, str) else k for k in knobs_value]
        else:
            knobs = []
        return words, knobs
    return ("" if value is None else str(value)), []


def finding_view(data: JsonDict) -> FindingView:
    words, knobs = _prescription(get(data, "prescription"))
    return FindingView(
        rule_id=text(data, "rule_id") or "unknown",
        title=text(data, "title") or text(data, "rule_id") or "",
        summary=text(data, "summary") or "",
        severity=text(data, "severity") or "n/a",
        bound=num(data, "amdahl_bound"),
        share=num(data, "share"),
        confidence=num(data, "confidence"),
        evidence=_evidence(get(data, "evidence")),
        prescription=words,
        knobs=knobs,
    )


def findings(diagnosis: JsonDict) -> list[FindingView]:
    """Findings ranked by their bound on gain (largest first; unbounded ones last)."""
    views = [finding_view(f) for f in items(diagnosis, "findings") if isinstance(f, dict)]
    return sorted(views, key=lambda f: -(f.bound if f.bound is not None else 0.0))


def headline(diagnosis: JsonDict) -> str:
    """The verdict in one sentence, from the record's primary bottleneck, share and regime."""
    primary = text(diagnosis, "primary_bottleneck")
    if primary is None:
        return "No verdict recorded."
    share = num(diagnosis, "primary_share")
    regime = text(diagnosis, "regime")
    sentence = f"Primary bottleneck: {fmt.label(primary)}"
    if share is not None:
        sentence += f" ({fmt.percent(share)} of step time)"
    if regime and regime != "unknown":
        sentence += f"; the job is {regime}-bound"
    return sentence + "."


def verdict_section(diagnosis: JsonDict) -> VerdictSection:
    facts = [
        KeyValue("source", text(diagnosis, "source") or fmt.NA),
        KeyValue("target", text(diagnosis, "target") or fmt.NA),
        KeyValue("device", text(diagnosis, "device_name", "device") or fmt.NA),
        KeyValue("steps measured", fmt.number(integer(diagnosis, "step_count"))),
        KeyValue("median step", fmt.seconds(num(diagnosis, "median_step_s"))),
        KeyValue("p95 step", fmt.seconds(num(diagnosis, "p95_step_s"))),
    ]
    shares = mapping(diagnosis, "bottleneck_shares")
    facts += [KeyValue(f"{fmt.label(k)} share", fmt.percent(num(shares, k))) for k in shares]
    return VerdictSection(
        verdict=headline(diagnosis),
        primary_bottleneck=text(diagnosis, "primary_bottleneck"),
        regime=text(diagnosis, "regime"),
        confidence=num(diagnosis, "confidence"),
        regime_evidence=_evidence(get(diagnosis, "regime_evidence")),
        facts=[f for f in facts if f.value != fmt.NA],
        notes=[str(n) for n in items(diagnosis, "notes")],
    )
