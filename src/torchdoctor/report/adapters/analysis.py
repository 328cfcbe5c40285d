"""analysis.json (TraceAnalysis) -> the timeline summary and the roofline."""

from __future__ import annotations

from typing import Final

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import (
    JsonDict,
    floats,
    get,
    integer,
    items,
    mapping,
    num,
    scalars,
    text,
)
from torchdoctor.report.views import KeyValue, RooflineOp, RooflineSection, TimelineSection

#: The device timeline's fields, in the order the analyze issue defines them (percent).
DEVICE_TIMELINE_FIELDS: Final = (
    ("busy_pct", "busy"),
    ("computation_pct", "computation"),
    ("exposed_memcpy_pct", "exposed memcpy"),
    ("exposed_comm_pct", "exposed communication"),
    ("idle_pct", "idle"),
)
#: Sub-records whose scalar fields become timeline facts (launch overhead, syncs, idle gaps).
FACT_GROUPS: Final = (
    ("steps", "steps"),
    ("launches", "launches"),
    ("syncs", "syncs"),
    ("idle", "idle gaps"),
)
#: Ops drawn on the roofline and listed in the table: the most expensive ones.
MAX_OPS: Final = 40


def timeline_section(analysis: JsonDict) -> TimelineSection:
    device = get(analysis, "device_timeline")
    rows: list[KeyValue] = []
    note = None
    if isinstance(device, dict):
        total = num(device, "total_us")
        rows.append(KeyValue("window", fmt.micros(total)))
        rows += [
            KeyValue(name, fmt.pct_value(num(device, key))) for key, name in DEVICE_TIMELINE_FIELDS
        ]
    else:
        note = "The trace has no device activity; the step breakdown below is host time."
    facts: list[KeyValue] = []
    for key, group in FACT_GROUPS:
        for k, v in scalars(mapping(analysis, key)):
            facts.append(KeyValue(f"{group}: {fmt.evidence_label(k)}", fmt.evidence_value(k, v)))
    return TimelineSection(
        device=rows,
        step_breakdown=floats(mapping(analysis, "step_breakdown")),
        facts=facts,
        note=note,
    )


def _op(data: JsonDict) -> RooflineOp:
    return RooflineOp(
        name=text(data, "name") or "?",
        count=integer(data, "count"),
        # Device time where the trace has device activity, else the op's own host time.
        time_us=(num(data, "device_us") or None) or num(data, "self_host_us"),
        time_share=None,
        flops=num(data, "flops"),
        intensity=num(data, "intensity"),
        achieved_flops_per_s=num(data, "achieved_flops_per_s"),
        achieved_bytes_per_s=num(data, "achieved_bytes_per_s"),
        bound=text(data, "bound"),
    )


def roofline_section(
    analysis: JsonDict, env_peak: dict[str, float], env_bw: float | None
) -> RooflineSection:
    """The op table against the ceilings the analysis used (else the run's measured ones)."""
    ops = [_op(o) for o in items(analysis, "ops") if isinstance(o, dict)]
    ops.sort(key=lambda o: -(o.time_us or 0.0))
    ceilings = mapping(analysis, "ceilings")
    peak = floats(mapping(ceilings, "peak_flops")) or env_peak
    bandwidth = num(ceilings, "mem_bandwidth_bytes_per_s") or env_bw
    note = text(analysis, "ceilings_note") or text(ceilings, "source")
    return RooflineSection(
        ops=ops[:MAX_OPS], peak_flops=peak, mem_bandwidth_bytes_per_s=bandwidth, ceilings_note=note
    )
