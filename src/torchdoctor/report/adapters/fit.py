"""The memory ladder of `tune --objective fit` (tune.json's `fit`) as a `Blocks`: the cap,
the baseline's peak, each step's peak with its spread, and the batch that fits."""

from __future__ import annotations

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import JsonDict, get, integer, items, mapping, num, text
from torchdoctor.report.blocks import Blocks, Table
from torchdoctor.report.load import RunRecords
from torchdoctor.report.views import KeyValue


def _spread(row: JsonDict) -> str:
    spread = get(row, "peak_spread_bytes")
    if not isinstance(spread, list | tuple) or len(spread) != 2:
        return fmt.NA
    low, high = spread
    return fmt.nbytes(low) if low == high else f"{fmt.nbytes(low)} - {fmt.nbytes(high)}"


def _yes_no(value: object) -> str:
    return fmt.NA if value is None else ("yes" if value else "no")


def _batch(row: JsonDict) -> str:
    batch, accum = integer(row, "batch_size"), integer(row, "grad_accum") or 1
    if batch is None:
        return fmt.NA
    return f"{batch} x {accum}" if accum > 1 else str(batch)


def _loss(row: JsonDict) -> str:
    deviation = num(row, "loss_deviation")
    return fmt.signed_percent(deviation) if deviation is not None else ""


def _decision(row: JsonDict) -> str:
    if text(row, "kind") == "baseline":
        return "baseline"
    return "kept" if get(row, "kept") else (text(row, "outcome") or "").replace("_", " ")


def memory_ladder_view(found: RunRecords) -> Blocks | None:
    fit = get(found.records.get("tune"), "fit")
    if not isinstance(fit, dict):
        return None
    share = num(fit, "max_memory_fraction")
    cap = fmt.nbytes(integer(fit, "max_memory_bytes"))
    if share:
        cap = f"{cap} ({fmt.percent(share, 0)} of the baseline's peak)"
    target = integer(fit, "target_batch")
    facts = [
        KeyValue("cap", cap),
        KeyValue(
            "goal",
            f"fit the effective batch of {target}"
            if target is not None
            else "the largest batch that fits",
        ),
        KeyValue(
            "baseline peak",
            f"{fmt.nbytes(integer(fit, 'baseline_peak_bytes'))} "
            f"({'fits' if get(fit, 'baseline_fits') else 'over the cap'})",
        ),
        KeyValue(
            "result",
            f"{_batch(fit)} per optimizer step at {fmt.nbytes(integer(fit, 'peak_memory_bytes'))}"
            f" ({'fits' if get(fit, 'fits') else 'does not fit'})",
        ),
    ]
    rows = [
        [
            str(integer(row, "step") or 0),
            fmt.change(mapping(row, "change")) if row.get("change") else "baseline",
            _batch(row),
            fmt.nbytes(integer(row, "peak_memory_bytes")),
            _spread(row),
            _yes_no(get(row, "fits")),
            fmt.rate(num(row, "samples_per_s")),
            _loss(row),
            _decision(row),
        ]
        for row in items(fit, "rows")
        if isinstance(row, dict)
    ]
    header = ["#", "change", "batch", "peak", "peak per chunk", "fits", "samples/s", "loss"]
    header.append("decision")
    return Blocks(
        title="Memory ladder",
        facts=facts,
        tables=[Table(header, rows)],
        notes=[
            "Peak: the median of the steady chunks' peaks (on a CPU the worker's resident set, on "
            "CUDA the allocator's); a step is kept when all its peaks lie below the best's and "
            "it trains within the baseline's spread. Samples/s are measured alone, indicative."
        ],
    )
