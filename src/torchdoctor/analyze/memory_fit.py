"""Memory to its owners, and the largest batch that fits a budget.

`split_owners` turns one measured step (`StepMemory`) into its owners at the step's peak.
`plan_memory` fits the steps measured at two or three batch sizes against the batch size,
memory(batch) = fixed + per_sample * batch (least squares, with its residual), and
`predict_max_batch` reads the largest batch under a budget.

A step's peak is not one line in the batch: a small batch peaks in the optimizer's step
(per-parameter temporaries, growing slowly), a large one at the end of the forward (the
activations), so a line through a few small batches' peaks misses the bend. Each local maximum
of the step's memory timeline is fitted as its own line instead, and the footprint at any batch
is the largest of them (`envelope_lines`). Where activations make up most of the binding line's
per-sample slope, activation checkpointing pays: it trades recomputation for that share.

For another stage that needs the prediction (the tuner's memory objective)::

    plan = analyze.study_memory(workload, batch_sizes=[8, 16, 32], device="cuda")
    analyze.predict_max_batch(plan, budget_bytes)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from torchdoctor.core.errors import UsageError
from torchdoctor.core.memory_owners import (
    LinearFit,
    MemoryOwners,
    MemoryPlan,
    StepMemory,
)

#: Checkpointing pays where activations are at least half of the binding line's per-sample
#: slope: dropping them at least doubles the batch that fits, worth the one extra forward it
#: costs (about 30% more compute per step: Chen et al. 2016, "Training Deep Nets with
#: Sublinear Memory Cost", section 4).
CHECKPOINT_PAYS_SHARE = 0.5


def split_owners(step: StepMemory) -> MemoryOwners:
    """The step's peak by owner: what each held at the step's highest moment.

    The measured step says which of its own storages were alive then (`StepMemory.at_peak`);
    the parameters and optimizer state were resident throughout. On a GPU the allocator's peak
    also holds its rounding of every block, which goes to temporaries with what no owner
    claims. Without `at_peak` (a step measured otherwise) the owners are taken whole and the
    temporaries are what is left of the peak, never below 0.
    """
    peak = step.peak_bytes
    resident = step.parameters_bytes + step.optimizer_state_bytes
    if step.at_peak:
        grads = step.at_peak.get("gradients", 0)
        acts = step.at_peak.get("activations", 0)
    else:
        grads, acts = step.gradients_bytes, step.activations_bytes
    slack = None
    if step.phase_reserved_peaks:
        slack = max(0, max(step.phase_reserved_peaks.values()) - peak)
    return MemoryOwners(
        batch_size=step.batch_size,
        device=step.device,
        source=step.source,
        parameters_bytes=step.parameters_bytes,
        gradients_at_peak_bytes=grads,
        optimizer_state_bytes=step.optimizer_state_bytes,
        activations_at_peak_bytes=acts,
        temporaries_bytes=max(0, peak - resident - grads - acts),
        gradients_bytes=step.gradients_bytes,
        activations_saved_bytes=step.activations_bytes,
        slack_bytes=slack,
        peak_bytes=peak,
    )


def phase_footprints(step: StepMemory) -> dict[str, int]:
    """Each phase's footprint: the allocator's reserved peak where there is one, else the
    allocated peak."""
    return dict(step.phase_reserved_peaks or step.phase_peaks)


def fit_line(batch_sizes: Sequence[int], values: Sequence[float]) -> LinearFit:
    """The least-squares line through (batch size, bytes)."""
    if len(set(batch_sizes)) < 2:
        raise UsageError(
            f"a memory fit needs two distinct batch sizes, got {sorted(set(batch_sizes))}",
            hint="measure at two or three batch sizes, e.g. 8,16,32",
        )
    x = np.asarray(batch_sizes, dtype=float)
    y = np.asarray(values, dtype=float)
    design = np.stack([np.ones_like(x), x], axis=1)
    (fixed, slope), *_ = np.linalg.lstsq(design, y, rcond=None)
    residuals = y - (fixed + slope * x)
    return LinearFit(
        fixed_bytes=float(fixed),
        per_sample_bytes=float(slope),
        residual_bytes=float(math.sqrt(float(np.mean(residuals**2)))),
        batch_sizes=[int(b) for b in batch_sizes],
    )


#: Batch sizes at which the envelope's lines are compared to find the ones that bind: powers
#: of two up to 2**24, past any batch a single device trains with.
_ENVELOPE_PROBES = np.asarray([2.0**k for k in range(25)])


def envelope_lines(steps: Sequence[StepMemory]) -> list[LinearFit] | None:
    """The lines whose maximum is the step's footprint, one per point of the aligned timelines.

    Each local maximum of a step's tensor timeline is fitted against the batch size; the step's
    footprint at any batch is the largest of these lines (the activations' point binds at a
    large batch, the gradients' or the optimizer's at a small one), plus what the allocator
    holds beyond the tensors, fitted on its own. Only the lines that are the largest at some
    batch are kept. None when the timelines do not align (the steps ran different ops).
    """
    lengths = {len(s.timeline) for s in steps}
    if len(lengths) != 1 or 0 in lengths or len({s.batch_size for s in steps}) < 2:
        return None
    x = np.asarray([s.batch_size for s in steps], dtype=float)
    y = np.asarray([s.timeline for s in steps], dtype=float)  # batches x points
    design = np.stack([np.ones_like(x), x], axis=1)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)  # 2 x points
    residual = np.sqrt(np.mean((y - design @ coef) ** 2, axis=0))
    # What the footprint holds beyond the tensors: on a GPU the allocator's rounding of each
    # block, its workspaces (cuBLAS) and its slack (reserved less allocated); nothing on the CPU.
    slack = fit_line(
        [s.batch_size for s in steps], [max(0, _footprint(s) - max(s.timeline)) for s in steps]
    )
    binding = sorted(set(np.argmax(coef[0][None, :] + np.outer(_ENVELOPE_PROBES, coef[1]), axis=1)))
    return [
        LinearFit(
            fixed_bytes=float(coef[0, i]) + slack.fixed_bytes,
            per_sample_bytes=float(coef[1, i]) + slack.per_sample_bytes,
            residual_bytes=float(residual[i]) + slack.residual_bytes,
            batch_sizes=[s.batch_size for s in steps],
        )
        for i in binding
    ]


def _footprint(step: StepMemory) -> int:
    return max(phase_footprints(step).values())


def _lines(fits: MemoryPlan | Sequence[LinearFit] | LinearFit) -> list[LinearFit]:
    if isinstance(fits, MemoryPlan):
        return list(fits.envelope)
    return [fits] if isinstance(fits, LinearFit) else list(fits)


def predict_max_batch(fits: MemoryPlan | Sequence[LinearFit] | LinearFit, budget_bytes: int) -> int:
    """The largest batch whose predicted footprint fits `budget_bytes`.

    `fits` is a plan (its envelope), one line, or several lines (the step needs the largest).
    A line whose slope is not positive bounds nothing but the fixed part. Raises `UsageError`
    when not even one sample fits, or when no line grows with the batch.
    """
    lines = _lines(fits)
    if not lines:
        raise ValueError("predict_max_batch needs at least one line")
    fixed = max(line.at(0) for line in lines)
    limits = [
        math.floor((budget_bytes - line.fixed_bytes) / line.per_sample_bytes)
        for line in lines
        if line.per_sample_bytes > 0
    ]
    best = min(limits) if limits else None
    if budget_bytes < fixed or (best is not None and best < 1):
        raise UsageError(
            f"memory budget {_mib(budget_bytes)} fits no batch: a step needs {_mib(fixed)} "
            f"before its first sample and {_mib(max(line.at(1) for line in lines))} at batch 1",
            hint="raise the budget, or shrink the model or its optimizer state",
        )
    if best is None:
        raise UsageError(
            "the measured footprint does not grow with the batch, so no largest batch follows",
            hint="measure at batch sizes further apart",
        )
    return best


def _mib(nbytes: float) -> str:
    # (report/format.py formats sizes for people, but sits to the right of this stage)
    return f"{nbytes / 2**20:.1f} MiB"


def owners_plan(target: str, step: StepMemory) -> MemoryPlan:
    """One measured step's owners, without a fit (a script's step, at its own batch)."""
    rss = step.process_rss_bytes
    base = None
    if rss is not None and step.source == "tensors":
        base = float(rss - step.parameters_bytes - step.optimizer_state_bytes)
    return MemoryPlan(
        workload=target, device=step.device, steps=[split_owners(step)], process_base_bytes=base
    )


def _binding(lines: Sequence[LinearFit], batch: float) -> LinearFit:
    return max(lines, key=lambda line: line.at(batch))


def plan_memory(
    workload: str,
    steps: Sequence[StepMemory],
    *,
    budget_bytes: int | None = None,
) -> MemoryPlan:
    """Fit the steps' footprints against the batch size; predict under `budget_bytes`."""
    if not steps:
        raise ValueError("plan_memory needs measured steps")
    ordered = sorted(steps, key=lambda s: s.batch_size)
    batches = [s.batch_size for s in ordered]
    peak = fit_line(batches, [_footprint(s) for s in ordered])
    envelope = envelope_lines(ordered) or [peak]
    activations = fit_line(batches, [s.activations_bytes for s in ordered])
    max_batch = without = None
    where = float(batches[-1])
    if budget_bytes is not None:
        max_batch = predict_max_batch(envelope, budget_bytes)
        where = float(max_batch)
        # Checkpointing's bound: every line less the activations' slope (never below flat).
        lean = [
            line.model_copy(
                update={
                    "per_sample_bytes": line.per_sample_bytes
                    - min(line.per_sample_bytes, max(0.0, activations.per_sample_bytes))
                }
            )
            for line in envelope
        ]
        if any(line.per_sample_bytes > 0 for line in lean):
            without = predict_max_batch(lean, budget_bytes)
    bases = [
        s.process_rss_bytes - s.parameters_bytes - s.optimizer_state_bytes
        for s in ordered
        if s.process_rss_bytes is not None and s.source == "tensors"
    ]
    edge = _binding(envelope, where)
    slope = edge.per_sample_bytes
    share = min(1.0, max(0.0, activations.per_sample_bytes / slope)) if slope > 0 else 0.0
    return MemoryPlan(
        workload=workload,
        device=ordered[0].device,
        steps=[split_owners(s) for s in ordered],
        peak_fit=peak,
        envelope=envelope,
        edge_fit=edge,
        activations_fit=activations,
        activation_share=share,
        checkpointing_pays=share >= CHECKPOINT_PAYS_SHARE,
        process_base_bytes=float(np.mean(bases)) if bases else None,
        budget_bytes=budget_bytes,
        max_batch=max_batch,
        max_batch_without_activations=without,
    )
