"""Memory to its owners (memory.json's `MemoryPlan`) as a `Blocks`: the owners at each batch
size, the fit, and the largest batch under the budget."""

from __future__ import annotations

from typing import Any

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import get, integer, items, num, text
from torchdoctor.report.blocks import Blocks, Table
from torchdoctor.report.load import RunRecords
from torchdoctor.report.views import KeyValue

#: The owners' columns: (field of `MemoryOwners`, header).
OWNERS: tuple[tuple[str, str], ...] = (
    ("parameters_bytes", "parameters"),
    ("gradients_at_peak_bytes", "gradients"),
    ("optimizer_state_bytes", "optimizer state"),
    ("activations_at_peak_bytes", "activations"),
    ("temporaries_bytes", "temporaries"),
    ("slack_bytes", "allocator slack"),
    ("peak_bytes", "peak"),
)


def _line(fit: Any) -> str:
    return (
        f"{fmt.nbytes(num(fit, 'fixed_bytes'))} + {fmt.nbytes(num(fit, 'per_sample_bytes'))} "
        f"per sample (residual {fmt.nbytes(num(fit, 'residual_bytes'))})"
    )


def memory_line(plan: dict[str, Any]) -> str:
    """One line for a terminal: the largest step's owners, and the prediction if any."""
    steps = [s for s in items(plan, "steps") if isinstance(s, dict)]
    if not steps:
        return "memory: nothing measured"
    last = steps[-1]
    owners = ", ".join(
        f"{header} {fmt.nbytes(num(last, key))}"
        for key, header in OWNERS[:-1]
        if num(last, key) is not None
    )
    peak = fmt.nbytes(num(last, "peak_bytes"))
    out = f"memory at batch {integer(last, 'batch_size')}: {owners}; peak {peak}"
    if integer(plan, "max_batch") is not None:
        budget = fmt.nbytes(num(plan, "budget_bytes"))
        out += f"; largest batch under {budget}: {integer(plan, 'max_batch')}"
    return out


def oom_edge_text(plan: dict[str, Any], edge: dict[str, Any]) -> str:
    """The real edge, how it was found, and the prediction against it."""
    found, over, high = integer(edge, "edge"), integer(edge, "first_over"), integer(edge, "high")
    probes = len(items(edge, "probes"))
    how = (
        "the CPU's data size capped (RLIMIT_DATA)"
        if text(edge, "mechanism") == "rlimit_data"
        else "the CUDA allocator capped"
    )
    if found is None or found < 1:
        return f"not even batch 1 ran under the cap ({how}; {probes} probes)"
    if high is not None and found >= high:
        return f"at least {found}, the search's top ({how}; {probes} probes)"
    out = f"{found}"
    if over is not None:
        out += f" (batch {over} ran out of memory)"
    predicted = integer(plan, "max_batch")
    if predicted is not None:
        out += f"; predicted/measured {predicted / found:.2f}"
    return out + f" ({how}; {probes} probes)"


def memory_blocks(plan: dict[str, Any]) -> Blocks:
    """The plan's view: facts (fit, prediction, checkpointing), the owners per batch size."""
    steps = [s for s in items(plan, "steps") if isinstance(s, dict)]
    rows = [
        [fmt.number(integer(s, "batch_size"))]
        + [fmt.nbytes(num(s, key)) if num(s, key) is not None else fmt.NA for key, _ in OWNERS]
        for s in steps
    ]
    source = text(steps[0], "source") if steps else None
    facts = [
        KeyValue("workload", f"{text(plan, 'workload')} on {text(plan, 'device')}"),
        KeyValue(
            "peak from",
            "the CUDA caching allocator"
            if source == "cuda_allocator"
            else "the live tensors (CPU: malloc keeps no statistics)",
        ),
    ]
    if get(plan, "peak_fit") is not None:
        facts += [
            KeyValue("footprint fit", _line(get(plan, "peak_fit"))),
            KeyValue("binding line", _line(get(plan, "edge_fit"))),
            KeyValue("activations", _line(get(plan, "activations_fit"))),
            KeyValue(
                "activation checkpointing",
                f"{'pays' if get(plan, 'checkpointing_pays') else 'does not pay'}: activations "
                f"are {fmt.percent(num(plan, 'activation_share'), 0)} of the per-sample slope",
            ),
        ]
    else:
        facts.append(
            KeyValue(
                "fit against the batch",
                "none: one step measured, at the job's own batch (`torchdoctor memory "
                "WORKLOAD` measures a workload at several)",
            )
        )
    if num(plan, "process_base_bytes") is not None:
        facts.append(
            KeyValue(
                "process besides the step",
                f"{fmt.nbytes(num(plan, 'process_base_bytes'))} resident (a cap on the "
                "resident set leaves the step that much less)",
            )
        )
    if integer(plan, "max_batch") is not None:
        facts.append(
            KeyValue(
                "largest batch that fits",
                f"{integer(plan, 'max_batch')} under {fmt.nbytes(num(plan, 'budget_bytes'))}",
            )
        )
        without = integer(plan, "max_batch_without_activations")
        if without is not None:
            facts.append(KeyValue("with no activations kept (bound)", str(without)))
    edge = get(plan, "oom_edge")
    if isinstance(edge, dict):
        facts.append(KeyValue("measured out-of-memory edge", oom_edge_text(plan, edge)))
    return Blocks(
        title="Memory to its owners, at each step's peak",
        facts=facts,
        tables=[Table(["batch", *(header for _, header in OWNERS)], rows)],
        notes=[
            "Each owner is what it held at the step's peak (backward frees activations as it "
            "makes gradients), so the owners add up to the peak; the activations fit counts "
            "every activation saved for backward."
        ],
    )


def memory_view(found: RunRecords) -> Blocks | None:
    plan = found.records.get("memory")
    return memory_blocks(plan) if isinstance(plan, dict) else None
