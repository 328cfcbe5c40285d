"""A rank's FSDP2 analysis (analysis.json's `fsdp`) -> each unit's all-gathers and
reduce-scatters, hidden or exposed, and the unsharded peak, as a `Blocks` view."""

from __future__ import annotations

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import JsonDict, integer, items, mapping, num, text
from torchdoctor.report.blocks import Blocks, Table
from torchdoctor.report.views import KeyValue


def _ms(value: float | None) -> str:
    return fmt.NA if value is None else f"{value:.2f}"


def _pair(total: float | None, exposed: float | None) -> str:
    """'time / exposed' in ms (the title names the unit), '-' when there was none."""
    if not total and not exposed:
        return "-"
    return f"{_ms(total)} / {_ms(exposed)}"


def _dtype(value: str | None) -> str:
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(value or "", fmt.NA)


def fsdp_blocks(analysis: JsonDict | None) -> Blocks | None:
    """The view; None when the analysis holds no FSDP2 unit."""
    f = mapping(analysis, "fsdp")
    if not f:
        return None
    step = num(f, "step_ms") or 0.0
    units = [u for u in items(f, "units") if isinstance(u, dict)]
    rows = [
        [
            text(u, "name") or fmt.NA,
            fmt.nbytes(num(u, "unsharded_bytes")),
            f"{_dtype(text(u, 'param_dtype'))} / {_dtype(text(u, 'reduce_dtype'))}",
            _pair(num(u, "forward_all_gather_ms"), num(u, "forward_exposed_ms")),
            _pair(num(u, "backward_all_gather_ms"), num(u, "backward_exposed_ms")),
            _pair(num(u, "reduce_scatter_ms"), num(u, "reduce_scatter_exposed_ms")),
            fmt.percent(num(u, "forward_prefetched"), 0),
        ]
        for u in units
    ]

    def share(key: str) -> str:
        value = num(f, key)
        return f"{_ms(value)} ms ({fmt.percent(value / step if value and step else 0.0, 0)})"

    rank = integer(analysis, "rank")
    return Blocks(
        title="FSDP units" + (f" (rank {rank})" if rank is not None else ""),
        facts=[
            KeyValue("units", fmt.number(len(units))),
            KeyValue("exposed all-gather", share("exposed_all_gather_ms")),
            KeyValue("exposed reduce-scatter", share("exposed_reduce_scatter_ms")),
            KeyValue("all-gathers prefetched", fmt.percent(num(f, "prefetched_all_gathers"), 0)),
            KeyValue("re-gathered in backward", f"{num(f, 'backward_all_gathers') or 0:.0f}"),
            KeyValue("unsharded peak", fmt.nbytes(num(f, "unsharded_peak_bytes"))),
            KeyValue("timed by", text(f, "collective_events") or fmt.NA),
        ],
        tables=[
            Table(
                header=[
                    "unit",
                    "unsharded",
                    "dtype (gather / reduce)",
                    "fwd all-gather / exposed",
                    "bwd all-gather / exposed",
                    "reduce-scatter / exposed",
                    "fwd prefetched",
                ],
                rows=rows,
                title="Each unit per step, ms (exposed: the rank waited or ran FSDP's copies; "
                "the rest of a collective ran under compute)",
            )
        ],
        notes=[str(n) for n in items(f, "notes")],
    )
