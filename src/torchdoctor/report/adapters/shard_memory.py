"""Memory per rank under FSDP2 (`ShardPlan`, `memory WORKLOAD --nproc N`) as a `Blocks`: each
N's owners per rank, the peak, and the largest batch per rank under the budget."""

from __future__ import annotations

from typing import Any

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import integer, items, mapping, num, text
from torchdoctor.report.blocks import Blocks, Table
from torchdoctor.report.views import KeyValue

#: The owners' columns: (field of `RankMemory`, header).
OWNERS: tuple[tuple[str, str], ...] = (
    ("parameters_bytes", "parameters"),
    ("gradients_bytes", "gradients"),
    ("optimizer_state_bytes", "optimizer state"),
    ("buffers_bytes", "buffers"),
    ("unsharded_bytes", "unsharded units"),
    ("activations_bytes", "activations"),
    ("peak_bytes", "peak"),
)


#: How each strategy is named in the table.
STRATEGIES = {"ddp": "DDP", "fsdp": "FSDP", "fsdp_offload": "FSDP, CPU offload"}


def _verdict(plan: dict[str, Any], world: int | None) -> str:
    limits = mapping(plan, "max_batch")
    best = limits.get(str(world), limits.get(world)) if world is not None else None  # type: ignore[call-overload]
    if num(plan, "budget_bytes") is None or best is None:
        return ""
    return f"fits, batch {best} per rank" if int(best) >= 1 else "does not fit"


def _answer(plan: dict[str, Any], rank: dict[str, Any]) -> str:
    world = integer(rank, "world_size")
    budget = fmt.nbytes(num(plan, "budget_bytes"))
    verdict = _verdict(plan, world)
    if verdict == "does not fit":
        return (
            f"N={world}: does not fit in {budget} per rank (one sample needs "
            f"{fmt.nbytes(num(rank, 'peak_bytes'))})."
        )
    return f"N={world}: {verdict} under {budget}."


def shard_plan_blocks(plan: dict[str, Any]) -> Blocks:
    """The facts of the estimate, then one row per N."""
    fit = mapping(plan, "activations_fit")
    shape = mapping(plan, "shape")
    facts = [
        KeyValue("workload", text(plan, "workload") or "?"),
        KeyValue("parameters", f"{integer(plan, 'parameters') or 0:,}"),
        KeyValue(
            "sharded in",
            f"{len(items(shape, 'units'))} units (the root last); all-gathered in "
            f"{text(plan, 'param_dtype')}, {integer(plan, 'prefetch')} unit(s) prefetched",
        ),
        KeyValue(
            "optimizer",
            f"{text(shape, 'optimizer')}: {integer(shape, 'states_per_element')} state(s) "
            "per element",
        ),
        KeyValue(
            "activations",
            f"{fmt.nbytes(num(fit, 'fixed_bytes'))} + "
            f"{fmt.nbytes(num(fit, 'per_sample_bytes'))} per sample (fake steps)",
        ),
        KeyValue("estimated in", fmt.seconds(num(plan, "wall_s"))),
    ]
    if num(plan, "budget_bytes") is not None:
        facts.append(KeyValue("budget per rank", fmt.nbytes(num(plan, "budget_bytes"))))
    ranks = [r for r in items(plan, "ranks") if isinstance(r, dict)]
    header = ["per rank", *(f"N={integer(r, 'world_size')}" for r in ranks)]
    rows = [["batch", *(str(integer(r, "batch")) for r in ranks)]]
    rows += [[h, *(fmt.nbytes(num(r, key)) for r in ranks)] for key, h in OWNERS]
    budget = num(plan, "budget_bytes") is not None
    notes = [_answer(plan, rank) for rank in ranks] if budget else []
    notes += [
        "Per rank: parameters, gradients and optimizer state sharded over the ranks; the "
        "root's and the largest unit's parameters (times the prefetch + 1) all-gathered; "
        "the peak is the backward's largest moment (activations alive, gradient shards "
        "landed) or the optimizer's step, whichever is larger. DDP, FSDP and offload are "
        "set side by side at each N's batch."
    ]
    tables = [Table(header, rows)]
    costs = [c for c in items(plan, "strategies") if isinstance(c, dict)]
    if costs:
        tables.append(
            Table(
                ["strategy", "ranks", "batch", "device", "host", "network / step", "host link"],
                [
                    [
                        STRATEGIES.get(text(c, "strategy") or "", text(c, "strategy") or "?"),
                        str(integer(c, "world_size")),
                        str(integer(c, "batch")),
                        fmt.nbytes(num(c, "device_bytes")),
                        fmt.nbytes(num(c, "host_bytes")),
                        fmt.nbytes(num(c, "network_bytes")),
                        fmt.nbytes(num(c, "host_link_bytes")),
                    ]
                    for c in costs
                ],
                title="DDP, FSDP and FSDP with CPU offload, per rank",
            )
        )
    return Blocks(title="Memory per rank (FSDP2)", facts=facts, tables=tables, notes=notes)
