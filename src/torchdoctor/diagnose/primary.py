"""Choosing the primary bottleneck: the largest share of step time a fix could address.

Candidates come from two places:
- each finding of at least low severity proposes its `bottleneck` with its `share`;
- each measured phase proposes the category it belongs to: data_wait -> data_loading,
  h2d -> host_device_transfer, optimizer -> optimizer, other -> other_host, and the model's
  forward+backward -> the roofline class holding most operator time (compute,
  memory_bandwidth, or framework_overhead), compute without an op table; a GPU trace's
  device idle share -> framework_overhead (the device waits on the host).
A category's share is the largest any candidate proposes for it (shares are not summed:
two rules may describe the same time). The winner is the largest share; ties (within
`TIE_TOLERANCE`) go to the category more confident findings, then to the category earlier in
`findings.BOTTLENECKS`, the cheaper fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import BOTTLENECKS, SEVERITY_ORDER, Bottleneck, Finding
from torchdoctor.diagnose.regime import Regime
from torchdoctor.diagnose.rules._common import compute_share, unexplained_idle_share

#: Shares closer than this are a tie: step-time shares on a busy machine move by about a
#: point between runs (measure's noise warnings start at 10% IQR of the whole step).
TIE_TOLERANCE: Final = 0.01

#: Confidence of a category proposed only by a measured phase: the time is measured, its
#: cause is only inferred from where it was spent.
PHASE_CONFIDENCE: Final = 0.5

#: The model's own work, and the categories in which the device (or the step) waits on
#: something outside it; see `select_primary`.
OWN_WORK: Final[frozenset[Bottleneck]] = frozenset({"compute", "memory_bandwidth"})
DEVICE_WAITS: Final[frozenset[Bottleneck]] = frozenset(
    {"data_loading", "host_device_transfer", "host_sync", "communication"}
)

_PHASE_CATEGORY: Final[dict[str, Bottleneck]] = {
    "data_wait": "data_loading",
    "h2d": "host_device_transfer",
    "optimizer": "optimizer",
    "other": "other_host",
}
_REGIME_CATEGORY: Final[dict[Regime, Bottleneck]] = {
    "compute": "compute",
    "memory": "memory_bandwidth",
    "overhead": "framework_overhead",
    "unknown": "compute",
}


def candidate_shares(ev: Evidence, findings: Sequence[Finding]) -> dict[Bottleneck, float]:
    shares: dict[Bottleneck, float] = {}

    def propose(cat: Bottleneck, share: float) -> None:
        shares[cat] = max(shares.get(cat, 0.0), share)

    for f in findings:
        if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER["low"]:
            propose(f.bottleneck, f.share)
    if ev.steps is not None and ev.steps.phase_fractions:
        for phase, cat in _PHASE_CATEGORY.items():
            share = ev.steps.phase_fractions.get(phase, 0.0)  # type: ignore[call-overload]
            propose(cat, non_op_other_share(ev, share) if phase == "other" else share)
    model = compute_share(ev)
    if model is not None:
        propose(model_category(ev), model)
    if ev.trace is not None and ev.trace.has_device and ev.trace.idle_pct is not None:
        propose("framework_overhead", unexplained_idle_share(ev))
    return shares


def model_category(ev: Evidence) -> Bottleneck:
    """What the model's own time (forward + backward) is spent on: the roofline class with
    the most operator time; compute when unclassified time (no ceilings) is the largest."""
    if ev.trace is None or not ev.trace.time_by_bound:
        return "compute"
    tb = ev.trace.time_by_bound
    best = max(tb, key=lambda k: tb[k])
    return "compute" if best == "unknown" else _REGIME_CATEGORY[best]


def non_op_other_share(ev: Evidence, other: float) -> float:
    """The part of the `other` phase that is the host's own Python: not spent inside torch
    operators, and not blocked in host sync calls.

    A CPU trace says what share of the step ran inside operators ("CPU Exec"); what the
    named phases cannot hold of it ran in `other` (e.g. a forward written as plain
    functions, which no module hook sees), and is the framework's time, not the host's.
    Time measured inside sync calls made outside the phases is host_sync's share. The two
    may overlap (a printed tensor runs operators to format itself), so the larger is taken
    out, not their sum.
    """
    syncs = (ev.syncs.outside_phases_share if ev.syncs is not None else None) or 0.0
    ops_in_other = 0.0
    tr = ev.trace
    if tr is not None and not tr.has_device and "CPU Exec" in tr.step_breakdown:
        named = sum(ev.phase(p) or 0.0 for p in ("h2d", "forward", "backward", "optimizer"))
        ops_in_other = max(0.0, tr.step_breakdown["CPU Exec"] - named)
    return max(0.0, other - max(syncs, ops_in_other))


def select_primary(shares: dict[Bottleneck, float], findings: Sequence[Finding] = ()) -> Bottleneck:
    """The category with the largest share. Ties go to the category whose findings are more
    confident (a category proposed by a phase alone counts PHASE_CONFIDENCE), then to the
    earlier one in BOTTLENECKS.

    One exception: when the largest share is the model's own work (compute or memory
    bandwidth) and a high-severity finding says the device waits on something else (data,
    copies, syncs, communication), the wait is the primary bottleneck: while the device
    idles that long for its input, faster math shortens only the rest of the step, and the
    wait is the cheaper, exact fix.
    """
    if not shares:
        return "other_host"
    top = max(shares.values())
    largest = next(c for c in BOTTLENECKS if c in shares and shares[c] >= top)
    if largest in OWN_WORK:
        waits = [f for f in findings if f.severity == "high" and f.bottleneck in DEVICE_WAITS]
        if waits:
            return min(waits, key=lambda f: (BOTTLENECKS.index(f.bottleneck), -f.share)).bottleneck
    tied = [c for c in BOTTLENECKS if c in shares and shares[c] >= top - TIE_TOLERANCE]
    conf = {c: PHASE_CONFIDENCE for c in tied}
    for f in findings:
        if f.bottleneck in conf:
            conf[f.bottleneck] = max(conf[f.bottleneck], f.confidence)
    best = max(conf.values())
    return next(c for c in tied if conf[c] >= best)
