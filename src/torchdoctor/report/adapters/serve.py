"""serve.json -> the serving section: latency percentiles with their intervals, the curves,
the batching simulation's predictions, the SLA point. Copies and formats; computes nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import get, integer, items, mapping, num, text
from torchdoctor.report.blocks import Blocks, Table
from torchdoctor.report.load import RunRecords
from torchdoctor.report.views import KeyValue


@dataclass(frozen=True)
class CurveSeries:
    """One curve's points for the chart: throughput and request-latency percentiles."""

    axis: str
    x: list[float]
    samples_per_s: list[float]
    p50_s: list[float]
    p99_s: list[float]
    knee: int | None


@dataclass(frozen=True)
class ServeView(Blocks):
    """The section's facts and tables, and what its chart draws."""

    curves: list[CurveSeries] = field(default_factory=list)
    sla_bound_s: float | None = None
    sla_percentile: float | None = None
    sla_rate: float | None = None


def _ci(estimate: Any) -> str:
    low, high = num(estimate, "ci_low_s"), num(estimate, "ci_high_s")
    return f"[{fmt.seconds(low)}, {fmt.seconds(high) if high is not None else 'unbounded'}]"


def _percentile_rows(latency: Any) -> list[list[str]]:
    rows = []
    for p in items(mapping(latency, "summary"), "percentiles"):
        enough = bool(get(p, "enough_samples"))
        need = integer(p, "min_samples")
        rows.append(
            [
                f"p{num(p, 'percentile') or 0:g}",
                fmt.seconds(num(p, "value_s")),
                _ci(p),
                "yes" if enough else f"no (needs {fmt.number(need)})",
            ]
        )
    return rows


#: Each axis: the x value's field, and its name in a table.
_AXES = {
    "batch_size": ("batch_size", "batch size"),
    "threads": ("threads", "threads"),
    "instances": ("instances", "instances x threads"),
}


def _x_label(axis: str, p: Any) -> str:
    if axis == "instances":
        return f"{fmt.number(integer(p, 'instances'))} x {fmt.number(integer(p, 'threads'))}"
    return fmt.number(integer(p, _AXES.get(axis, _AXES["batch_size"])[0]))


def _curve_table(curve: Any) -> Table:
    axis = text(curve, "axis") or "batch_size"
    knee = integer(curve, "knee_index")
    rows = []
    for i, p in enumerate(items(curve, "points")):
        rows.append(
            [
                _x_label(axis, p) + (" (knee)" if i == knee else ""),
                fmt.rate(num(p, "samples_per_s"), "requests/s"),
                fmt.seconds(num(p, "p50_s")),
                fmt.seconds(num(p, "p95_s")),
                fmt.seconds(num(p, "p99_s")),
            ]
        )
    name = _AXES.get(axis, _AXES["batch_size"])[1]
    title = f"Throughput and latency vs {name}"
    if get(curve, "stopped_early"):
        title += " (stopped early: the last steps gained under 5%)"
    return Table(header=[name, "throughput", "p50", "p95", "p99"], rows=rows, title=title)


def _series(curve: Any) -> CurveSeries:
    axis = text(curve, "axis") or "batch_size"
    key = _AXES.get(axis, _AXES["batch_size"])[0]
    points = items(curve, "points")
    return CurveSeries(
        axis=axis,
        x=[float(num(p, key) or 0) for p in points],
        samples_per_s=[float(num(p, "samples_per_s") or 0) for p in points],
        p50_s=[float(num(p, "p50_s") or 0) for p in points],
        p99_s=[float(num(p, "p99_s") or 0) for p in points],
        knee=integer(curve, "knee_index"),
    )


def _prediction_table(serve: Any) -> Table | None:
    runs = items(serve, "predictions")
    if not runs:
        return None
    rows = [
        [
            fmt.rate(num(r, "target_rate"), "requests/s"),
            fmt.number(num(r, "mean_batch_size")),
            *(
                fmt.seconds(num(p, "value_s"))
                for p in items(mapping(r, "summary"), "percentiles")
                if num(p, "percentile") in (50.0, 99.0)
            ),
            fmt.rate(num(r, "goodput"), "requests/s"),
        ]
        for r in runs
    ]
    calibration = mapping(serve, "calibration")
    title = "Predicted by the batching simulation from t(b)"
    if calibration:
        title += (
            f", calibrated on one real batcher run at "
            f"{fmt.rate(num(calibration, 'rate'), 'requests/s')} "
            f"({fmt.number(integer(calibration, 'requests'))} requests)"
        )
    return Table(
        header=["arrival rate", "mean batch", "p50", "p99", "goodput (within the SLA)"],
        rows=rows,
        title=title,
    )


def _comparison_table(serve: Any) -> Table | None:
    rows = []
    for c in items(serve, "comparisons"):
        for p in items(c, "by_percentile"):
            rows.append(
                [
                    text(c, "candidate") or "n/a",
                    f"p{num(p, 'percentile') or 0:g}",
                    fmt.seconds(num(p, "baseline_s")),
                    fmt.seconds(num(p, "candidate_s")),
                    fmt.speedup(num(p, "speedup")),
                    fmt.interval(num(p, "ci_low"), num(p, "ci_high")),
                    (text(p, "verdict") or "n/a").replace("_", " "),
                ]
            )
    if not rows:
        return None
    return Table(
        header=["variant", "percentile", "eager", "variant's", "speedup", "interval", "verdict"],
        rows=rows,
        title="Variants against the eager model (interleaved, per request)",
    )


def _variant_setup_table(serve: Any) -> Table | None:
    rows = []
    for v in items(serve, "variant_setups"):
        accuracy = mapping(v, "accuracy")
        error = mapping(accuracy, "error")
        tolerance = mapping(accuracy, "tolerance")
        sqnr = num(error, "sqnr_db")
        gate = (
            f"SQNR ≥ {fmt.number(num(tolerance, 'min_sqnr_db'))} dB"
            if text(tolerance, "kind") == "sqnr"
            else f"allclose atol {num(tolerance, 'atol') or 0:g} "
            f"rtol {num(tolerance, 'rtol') or 0:g}"
        )
        rows.append(
            [
                text(v, "name") or "n/a",
                fmt.seconds(num(v, "setup_s")),
                gate,
                f"{num(error, 'max_rel_error') or 0:.2e}",
                "identical" if sqnr is None else f"{sqnr:.1f} dB",
                "passed" if get(accuracy, "passed") else "failed",
                ", ".join(str(m) for m in items(accuracy, "fp32_modules")) or "none",
            ]
        )
    if not rows:
        return None
    return Table(
        header=["variant", "setup", "gate", "max rel. error", "SQNR", "accuracy", "kept in fp32"],
        rows=rows,
        title="Variants: setup time (first call included) and accuracy against fp32 eager",
    )


def _sla_facts(search: Any) -> list[KeyValue]:
    if not search:
        return []
    best = mapping(search, "best")
    closest = mapping(search, "closest")
    facts = [
        KeyValue("SLA", text(mapping(search, "sla"), "text") or "n/a"),
        KeyValue("SLA status", text(search, "status") or "n/a"),
        KeyValue("SLA reason", text(search, "reason") or ""),
        KeyValue(
            "SLA search",
            f"{text(search, 'method')}, {fmt.number(integer(search, 'measurements'))} measurements",
        ),
    ]
    point = best or closest
    if point:
        label = "highest rate meeting it" if best else "closest point"
        facts.append(
            KeyValue(
                label,
                f"{fmt.rate(num(point, 'achieved_rate'), 'requests/s')} at "
                f"{fmt.seconds(num(point, 'latency_s'))}",
            )
        )
    return facts


def serve_view(found: RunRecords) -> ServeView | None:
    serve = found.records.get("serve")
    if serve is None:
        return None
    latency = mapping(serve, "latency")
    facts = [
        KeyValue("model", text(serve, "target") or "n/a"),
        KeyValue("device", text(serve, "device") or "n/a"),
        KeyValue("requests timed", fmt.number(integer(mapping(latency, "summary"), "n"))),
        KeyValue("first call", fmt.seconds(num(latency, "first_call_s"))),
        KeyValue(
            "warm-up",
            f"{fmt.number(integer(latency, 'warmup_calls'))} calls, "
            f"{fmt.seconds(num(latency, 'warmup_s'))}",
        ),
        KeyValue("percentiles settled", fmt.number(bool(get(latency, "settled")))),
        *_sla_facts(mapping(serve, "sla_search")),
    ]
    tables = [
        Table(
            header=["percentile", "latency", "95% interval", "enough requests"],
            rows=_percentile_rows(latency),
            title="Request latency at batch size 1",
        ),
        *(_curve_table(c) for c in items(serve, "curves")),
    ]
    tables += [
        t
        for t in (_prediction_table(serve), _variant_setup_table(serve), _comparison_table(serve))
        if t
    ]
    search = mapping(serve, "sla_search")
    best = mapping(search, "best")
    return ServeView(
        title="Serving",
        facts=facts,
        tables=tables,
        notes=[str(n) for n in items(serve, "notes")],
        curves=[_series(c) for c in items(serve, "curves")],
        sla_bound_s=num(mapping(search, "sla"), "bound_s"),
        sla_percentile=num(mapping(search, "sla"), "percentile"),
        sla_rate=num(best, "achieved_rate"),
    )


__all__ = ["CurveSeries", "ServeView", "serve_view"]
