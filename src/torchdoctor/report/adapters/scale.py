"""The scaling study (scaling.json) as a `Blocks` view: per N, measured against linear and
against the model; the gap-to-linear waterfall per N; the collectives' fits; the projections
(DDP's, and an FSDP2 job's)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import integer, items, mapping, num, pair, text
from torchdoctor.report.blocks import Blocks, Table
from torchdoctor.report.load import RunRecords
from torchdoctor.report.views import KeyValue

JsonDict = dict[str, Any]


@dataclass(frozen=True)
class ScalingView(Blocks):
    """The section's blocks, and the waterfall's numbers for its chart: per N > 1, the ideal
    step and the gap's parts (label, seconds)."""

    waterfall: list[tuple[int, float, list[tuple[str, float]]]] = field(default_factory=list)


def _serial(value: float | None) -> str:
    """Karp-Flatt's fraction; above 1 it means no more than a slowdown against N=1."""
    if value is not None and value > 1:
        return "over 100% (slower than N=1)"
    return fmt.percent(value)


def _band(low: float | None, high: float | None) -> str:
    return f"{fmt.seconds(low)} to {fmt.seconds(high)}"


def _worlds(study: JsonDict) -> Table:
    rows = []
    for w in items(study, "worlds"):
        projected = mapping(w, "projected")
        low, high = num(projected, "low_s"), num(projected, "high_s")
        rows.append(
            [
                fmt.number(integer(w, "world_size")),
                fmt.seconds(num(w, "step_s")),
                _band(*(pair(w.get("step_ci")) or (None, None))),
                fmt.rate(num(w, "samples_per_s")),
                fmt.speedup(num(w, "speedup")),
                fmt.percent(num(w, "efficiency")),
                _serial(num(w, "serial_fraction")),
                fmt.seconds(num(projected, "step_s")) if projected else "-",
                _band(low, high) if projected else "-",
                fmt.speedup(num(w, "projected_over_measured")),
            ]
        )
    header = ["N", "step", "95% CI", "throughput", "speedup", "efficiency", "serial fraction"]
    header += ["projected", "band", "projected/measured"]
    return Table(header=header, rows=rows, title="Measured per N, and the model's projection")


def _waterfall(study: JsonDict) -> Table:
    worlds = [w for w in items(study, "worlds") if (integer(w, "world_size") or 0) > 1]
    labels = [text(p, "label") or "" for p in items(worlds[0], "waterfall")] if worlds else []
    rows = []
    for w in worlds:
        parts = [fmt.seconds(num(p, "seconds")) for p in items(w, "waterfall")]
        gap = (num(w, "step_s") or 0.0) - (num(w, "ideal_s") or 0.0)
        rows.append(
            [
                fmt.number(integer(w, "world_size")),
                fmt.seconds(num(w, "ideal_s")),
                *parts,
                fmt.seconds(gap),
            ]
        )
    header = ["N", "linear (ideal step)", *labels, "gap (median step)"]
    return Table(header=header, rows=rows, title="Gap to linear scaling, per step (means)")


def _fits(study: JsonDict) -> Table:
    rows = []
    for bench in items(study, "benches"):
        for name, fit in mapping(bench, "fits").items():
            beta = num(fit, "beta_s_per_byte")
            algbw = 1.0 / beta if beta and beta > 0 else None
            rows.append(
                [
                    fmt.number(integer(bench, "world_size")),
                    name.replace("_", " "),
                    fmt.seconds(num(fit, "alpha_s")),
                    fmt.bandwidth(algbw),
                    fmt.percent(num(fit, "rel_rms_residual")),
                ]
            )
    header = ["N", "collective", "latency (alpha)", "bandwidth (1/beta)", "fit residual (rms)"]
    return Table(header=header, rows=rows, title="Collectives: alpha-beta fit")


def _projections(study: JsonDict) -> Table:
    rows = [
        [
            fmt.number(integer(p, "world_size")),
            (text(p, "architecture") or "").replace("_", " "),
            fmt.bandwidth(num(p, "busbw_bytes_per_s")),
            fmt.seconds(num(p, "step_s")),
            _band(num(p, "low_s"), num(p, "high_s")),
            fmt.seconds(num(p, "exposed_s")),
            fmt.seconds(num(p, "skew_s")),
            fmt.percent(num(p, "efficiency")),
            _serial(num(p, "serial_fraction")),
        ]
        for p in items(study, "projections")
    ]
    header = ["N", "architecture", "bus bandwidth", "step", "95% band", "exposed comm.", "skew"]
    header += ["efficiency", "serial fraction"]
    return Table(header=header, rows=rows, title="Projections")


def _fsdp(study: JsonDict) -> Table:
    rows = []
    for p in items(study, "fsdp"):
        comm = mapping(p, "communication")
        rows.append(
            [
                fmt.number(integer(p, "world_size")),
                fmt.bandwidth(num(comm, "busbw_bytes_per_s")),
                fmt.seconds(num(p, "step_s")),
                _band(num(p, "low_s"), num(p, "high_s")),
                fmt.seconds(num(p, "compute_s")),
                f"{fmt.number(integer(comm, 'collectives'))}, {fmt.seconds(num(comm, 'seconds'))}",
                fmt.seconds(num(p, "exposed_s")),
                text(p, "overlap") or "-",
            ]
        )
    header = ["N", "bus bandwidth", "step", "95% band", "compute", "collectives"]
    header += ["exposed comm.", "overlap"]
    return Table(header=header, rows=rows, title="FSDP projections (all-gathers, reduce-scatters)")


#: How each strategy is named (as in the memory section's table).
_STRATEGIES = {"ddp": "DDP", "fsdp": "FSDP", "fsdp_offload": "FSDP, CPU offload"}
_FASTER = {"ddp": "DDP", "fsdp": "FSDP", "neither": "neither (bands overlap)"}


def _strategy_step(step: JsonDict | None) -> str:
    if not step:
        return "-"
    if num(step, "step_s") is None:
        return f"not projected: {text(step, 'why_not') or '-'}"
    band = _band(num(step, "low_s"), num(step, "high_s"))
    return f"{fmt.seconds(num(step, 'step_s'))} ({band})"


def _strategies(study: JsonDict) -> Table:
    rows = []
    for c in items(study, "strategies"):
        steps = {text(s, "strategy"): s for s in items(c, "steps") if isinstance(s, dict)}
        bandwidth = fmt.bandwidth(num(c, "busbw_bytes_per_s"))
        measured = c.get("measured_bandwidth") if isinstance(c, dict) else None
        rows.append(
            [
                fmt.number(integer(c, "world_size")),
                bandwidth + (" (measured)" if measured else ""),
                _strategy_step(steps.get("ddp")),
                _strategy_step(steps.get("fsdp")),
                _strategy_step(steps.get("fsdp_offload")),
                fmt.speedup(num(c, "fsdp_over_ddp")),
                _FASTER.get(text(c, "faster") or "", "-"),
            ]
        )
    header = ["N", "bus bandwidth", "DDP step (95% band)", "FSDP step (95% band)"]
    header += [f"{_STRATEGIES['fsdp_offload']} step", "FSDP / DDP", "faster"]
    return Table(header=header, rows=rows, title="DDP, FSDP and FSDP with CPU offload: step time")


def _shard_answer(study: JsonDict) -> str:
    """Should the job shard, for speed: the study's answer in one sentence."""
    start = integer(study, "fsdp_pays_from")
    if start is not None:
        return (
            f"Sharding pays in step time from N={start} at the measured bandwidth: FSDP's "
            "step is below DDP's there and at every larger size projected."
        )
    return (
        "Sharding does not pay in step time at any size projected at the measured bandwidth; "
        "shard for memory (`torchdoctor memory WORKLOAD --nproc N` sets the three side by "
        "side per rank)."
    )


def _waterfall_numbers(study: JsonDict) -> list[tuple[int, float, list[tuple[str, float]]]]:
    out = []
    for w in items(study, "worlds"):
        n, ideal = integer(w, "world_size"), num(w, "ideal_s")
        if n is None or n < 2 or ideal is None:
            continue
        parts = [(text(p, "label") or "", num(p, "seconds") or 0.0) for p in items(w, "waterfall")]
        out.append((n, ideal, parts))
    return out


def scaling_blocks(study: JsonDict) -> ScalingView:
    """The view of one study's JSON form."""
    model = mapping(study, "model")
    facts = [
        KeyValue("target", text(study, "target") or "-"),
        KeyValue("scaling", f"{text(study, 'mode')} ({text(study, 'backend')})"),
        KeyValue("threads per rank", fmt.number(integer(study, "threads_per_rank"))),
        KeyValue("nodes", fmt.number(integer(study, "nnodes"))),
    ]
    if model:
        facts.append(KeyValue("gradient bytes", fmt.nbytes(num(model, "gradient_bytes"))))
        facts.append(KeyValue("DDP buckets", fmt.number(len(items(model, "buckets")))))
        fitted = pair(mapping(model, "ring").get("sizes_fitted"))
        if fitted:  # the model's fit is over the sizes around the buckets (scale/fit.py)
            facts.append(
                KeyValue(
                    "all-reduce fit the model times buckets with",
                    f"sizes {fmt.nbytes(fitted[0])} to {fmt.nbytes(fitted[1])}",
                )
            )
        slowdown = num(model, "colocation_slowdown")
        if slowdown is not None and slowdown != 1.0:
            low, high = pair(model.get("colocation_ci")) or (None, None)
            facts.append(
                KeyValue(
                    "compute with all ranks at once (over alone)",
                    f"{fmt.speedup(slowdown)} ({fmt.speedup(low)} to {fmt.speedup(high)})",
                )
            )
    tables = [_worlds(study), _waterfall(study), _fits(study)]
    if items(study, "projections"):
        tables.append(_projections(study))
    if items(study, "fsdp"):
        tables.append(_fsdp(study))
    notes = [str(w) for w in items(study, "warnings")]
    if items(study, "strategies"):
        tables.append(_strategies(study))
        notes.insert(0, _shard_answer(study))
    return ScalingView(
        title="Scaling",
        facts=facts,
        tables=tables,
        notes=notes,
        waterfall=_waterfall_numbers(study),
    )


def scaling_view(found: RunRecords) -> ScalingView | None:
    study = found.records.get("scaling")
    return scaling_blocks(study) if study else None
