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
`TIE_TOLERANCE`) go to the category earlier in `findings.BOTTLENECKS`, the cheaper fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import BOTTLENECKS, SEVERITY_ORDER, Bottleneck, Finding
from torchdoctor.diagnose.regime import Regime
from torchdoctor.diagnose.rules._common import compute_share

#: Shares closer than this are a tie: step-time shares on a busy machine move by about a
#: point between runs (measure's noise warnings start at 10% IQR of the whole step).
TIE_TOLERANCE: Final = 0.01

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
            propose(cat, ev.steps.phase_fractions.get(phase, 0.0))  # type: ignore[call-overload]
    model = compute_share(ev)
    if model is not None:
        propose(model_category(ev), model)
    if ev.trace is not None and ev.trace.has_device and ev.trace.idle_pct is not None:
        propose("framework_overhead", ev.trace.idle_pct / 100.0)
    return shares


def model_category(ev: Evidence) -> Bottleneck:
    """What the model's own time (forward + backward) is spent on: the roofline class with
    the most operator time, or compute when there is no op table."""
    if ev.trace is None or not ev.trace.time_by_bound:
        return "compute"
    tb = ev.trace.time_by_bound
    best = max(("compute", "memory", "overhead"), key=lambda k: tb.get(k, 0.0))  # type: ignore[call-overload]
    return _REGIME_CATEGORY[best] if tb.get(best, 0.0) > 0 else "compute"  # type: ignore[call-overload,index]


def select_primary(shares: dict[Bottleneck, float]) -> Bottleneck:
    """The category with the largest share; ties go to the earlier one in BOTTLENECKS."""
    if not shares:
        return "other_host"
    top = max(shares.values())
    for cat in BOTTLENECKS:
        if cat in shares and shares[cat] >= top - TIE_TOLERANCE:
            return cat
    return "other_host"  # pragma: no cover - BOTTLENECKS lists every category
