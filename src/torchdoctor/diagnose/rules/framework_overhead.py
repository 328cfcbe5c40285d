"""framework_overhead: the step is dominated by per-op dispatch and launch cost, not math."""

from __future__ import annotations

from typing import Final

from torchdoctor.core.hostlines import HostLine
from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import EvidenceValue, Finding, Prescription, make_finding
from torchdoctor.diagnose.rules._common import compute_share, unexplained_idle_share
from torchdoctor.diagnose.rules.host_python_lines import line_evidence
from torchdoctor.knobs import BATCH_SIZE, COMPILE, CUDA_GRAPHS

RULE_ID: Final = "framework_overhead"
TITLE: Final = "Framework overhead: many tiny operators"

#: Median self time per operator call below which ops are overhead-sized. Eager PyTorch
#: spends a few microseconds per op in Python + dispatcher ("Making Deep Learning Go Brrrr
#: From First Principles", H. He, 2022: ~10 µs of overhead per op as a rule of thumb), so
#: an op whose whole time is under 10 µs is mostly overhead.
TINY_OP_US: Final = 10.0
#: Share of operator time the roofline classed as overhead-bound from which the rule fires.
MIN_OVERHEAD_OP_SHARE: Final = 0.3
#: Doubling the batch should nearly double a compute-bound step; if it grows the step by
#: less than this factor, most of the step is fixed per-step cost (overhead).
MAX_GROWTH_PER_DOUBLING: Final = 1.3
#: Operator calls per step from which a step is "many tiny ops": at the ~10 µs per op of
#: eager overhead above, 1000 ops cost >= 10 ms of dispatch per step, more than the math of
#: the small models where this happens.
MIN_OPS_PER_STEP: Final = 1000
#: GPU: share of the device window idle from which a trace is overhead-bound (the device is
#: waiting on the host more than it works). TraceLens/HTA call such traces "idle-dominated".
MIN_GPU_IDLE_SHARE: Final = 0.5


#: What vectorizing a loop over slices looks like, handed back with the line that loops.
VECTORIZE_SNIPPET: Final = """\
# before: one small op per slice, each paying the per-op overhead
#     for i in range(x.shape[0]):
#         out[i] = torch.relu(x[i] @ w[i]) + b[i]
# after: one batched op over all slices
out = torch.relu(torch.bmm(x, w)) + b
"""
#: Phases in which the script's own Python issues operators one call at a time (backward and
#: torch.optim's step are torch's loops, not a line of the script's).
_ISSUING_PHASES: Final = ("forward", "other")


def _issuing_line(ev: Evidence) -> HostLine | None:
    lines = ev.host_lines
    if lines is None or not lines.enough or not lines.lines:
        return None
    best = max(
        lines.lines, key=lambda h: sum(h.phases.get(p, 0.0) for p in _ISSUING_PHASES) * h.share
    )
    return best


def _batch_growth(ev: Evidence) -> float | None:
    """Step-time growth per doubling of the batch, from the two extreme measured points."""
    if ev.batch_scaling is None or len(ev.batch_scaling.points) < 2:
        return None
    pts = sorted(ev.batch_scaling.points.items())
    (b0, t0), (b1, t1) = pts[0], pts[-1]
    if b1 <= b0 or t0 <= 0:
        return None
    import math

    doublings = math.log2(b1 / b0)
    return float((t1 / t0) ** (1.0 / doublings)) if doublings > 0 else None


def check(ev: Evidence) -> Finding | None:
    evidence: dict[str, EvidenceValue] = {}
    fraction = 0.0  # of the compute share that is overhead
    reasons: list[str] = []
    tr = ev.trace
    if tr is not None and tr.has_device and tr.idle_pct is not None:
        # Idle the DataLoader or the sync points explain is theirs (dataloader_wait, host_sync).
        idle = unexplained_idle_share(ev)
        evidence["device_idle_share"] = round(tr.idle_pct / 100.0, 4)
        if idle < tr.idle_pct / 100.0:
            evidence["idle_share_not_data_or_syncs"] = round(idle, 4)
        if tr.short_kernel_frac is not None:
            evidence["kernels_shorter_than_launch"] = round(tr.short_kernel_frac, 4)
        if idle >= MIN_GPU_IDLE_SHARE:
            share = idle
            reasons.append(f"the device is idle {idle:.0%} of the window")
            return _finding(ev, share, evidence, reasons, confidence=0.6)
        return None
    if tr is not None:
        over = tr.time_by_bound.get("overhead", 0.0)
        evidence["overhead_op_time_share"] = round(over, 4)
        if tr.median_op_us is not None:
            evidence["median_op_us"] = round(tr.median_op_us, 2)
        if tr.ops_per_step is not None:
            evidence["ops_per_step"] = round(tr.ops_per_step, 1)
        many = tr.ops_per_step is not None and tr.ops_per_step >= MIN_OPS_PER_STEP
        in_ops = tr.step_breakdown.get("CPU Exec")
        if over >= MIN_OVERHEAD_OP_SHARE and many and in_ops is not None:
            # The whole in-operator share of the step is addressable: fusing or batching the
            # ops removes their dispatch cost and shrinks the rest.
            evidence["step_share_in_ops"] = round(in_ops, 4)
            reasons.append(
                f"{tr.ops_per_step:.0f} operator calls per step, {over:.0%} of their time "
                f"in calls under {TINY_OP_US:.0f} µs"
            )
            return _finding(ev, in_ops, evidence, reasons, confidence=0.7)
    growth = _batch_growth(ev)
    if growth is not None:
        evidence["step_growth_per_batch_doubling"] = round(growth, 3)
        if growth < MAX_GROWTH_PER_DOUBLING:
            # Fixed cost per step t0*(2 - growth) of t0 when time(b) = fixed + b*per_sample.
            fraction = max(fraction, min(1.0, 2.0 - growth))
            reasons.append(f"doubling the batch grows the step only {growth:.2f}x")
    base = compute_share(ev)
    if not reasons or base is None:
        return None
    return _finding(ev, base * fraction, evidence, reasons, confidence=0.6)


def _finding(
    ev: Evidence,
    share: float,
    evidence: dict[str, EvidenceValue],
    reasons: list[str],
    *,
    confidence: float,
) -> Finding:
    knobs: dict[str, int | bool | str | None] = {
        COMPILE.name: "reduce-overhead" if ev.is_gpu else "default"
    }
    # The line issuing the tiny ops, when the line sampler saw one: the user line with the
    # most time in the phases that issue operators (a Python loop over slices shows there).
    line = _issuing_line(ev)
    if line is not None:
        evidence = {**evidence, **line_evidence(line, line.share)}
    if ev.is_gpu:
        knobs[CUDA_GRAPHS.name] = True
    if ev.config.batch_size:
        knobs[BATCH_SIZE.name] = ev.config.batch_size * 2
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary="Per-op overhead dominates: " + "; ".join(reasons) + ".",
        bottleneck="framework_overhead",
        share=share,
        evidence=evidence,
        prescription=Prescription(
            knobs=knobs,
            code_change=(
                "fuse ops with torch.compile(model) (CUDA graphs with mode='reduce-overhead' "
                "on GPU), replace Python loops over small tensors with batched ops, or raise "
                "the batch size so each op does more work"
                + (f"; the ops are issued at {line.site} in {line.function}" if line else "")
            ),
            site=line.site if line else None,
            snippet=VECTORIZE_SNIPPET if line else None,
        ),
        confidence=confidence,
    )
