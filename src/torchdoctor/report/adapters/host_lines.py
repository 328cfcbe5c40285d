"""The host time by Python line (the line sampler's record in profile.json) as a `Blocks`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import get, items, mapping, num, text
from torchdoctor.report.blocks import Blocks, Table
from torchdoctor.report.load import RunRecords
from torchdoctor.report.views import KeyValue

#: Lines shown in the table (the record keeps more).
SHOWN_LINES = 10


def _main_phase(phases: dict[str, float]) -> str:
    if not phases:
        return fmt.NA
    phase = max(phases, key=lambda p: phases[p])
    return f"{phase} ({fmt.percent(phases[phase], 0)})"


def host_lines_view(found: RunRecords) -> Blocks | None:
    # A script's profile, or a workload's run (its diagnosis samples the lines).
    lines = get(found.records.get("profile"), "host_lines") or get(
        found.records.get("run_result"), "host_lines"
    )
    if not isinstance(lines, dict):
        return None
    rows = [
        [
            f"{text(line, 'file')}:{text(line, 'line')}",
            text(line, "function") or "",
            fmt.percent(num(line, "share")),
            fmt.seconds(num(line, "seconds_per_step")),
            _main_phase(mapping(line, "phases")),
        ]
        for line in items(lines, "lines")[:SHOWN_LINES]
        if isinstance(line, dict)
    ]
    if not rows:
        return None
    phases = mapping(lines, "phase_shares")
    facts = [
        KeyValue(
            "sampled",
            f"{fmt.number(num(lines, 'samples'))} samples over "
            f"{fmt.number(num(lines, 'steps'))} steady steps",
        ),
        KeyValue("sampler", _sampler(lines)),
        KeyValue("by phase", ", ".join(f"{p} {fmt.percent(v, 0)}" for p, v in phases.items())),
        KeyValue("outside user code", fmt.percent(num(lines, "outside_user_share"))),
    ]
    callers = [
        f"{text(line, 'file')}:{text(line, 'line')} called from {items(line, 'callers')[0]}"
        for line in items(lines, "lines")[:1]
        if isinstance(line, dict) and items(line, "callers")
    ]
    return Blocks(
        title="Host time by Python line",
        facts=facts,
        tables=[Table(["line", "function", "share of step", "per step", "phase"], rows)],
        notes=callers,
    )


def _sampler(lines: Mapping[str, Any]) -> str:
    """How often the sampler sampled: its period, and the longer one it ended at when it
    slowed down past the samples it needed (collect/line_sampler `interval_after`)."""
    first, last = num(lines, "interval_s") or 0.0, lines.get("last_interval_s")
    said = f"{text(lines, 'sampler')}, every {fmt.seconds(first)}"
    if isinstance(last, (int, float)) and last > first * 1.01:
        said += f", slowing to every {fmt.seconds(float(last))} once enough samples were taken"
    return said
