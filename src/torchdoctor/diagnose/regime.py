"""The regime: is the job compute-, memory- or overhead-bound?

The three regimes of "Making Deep Learning Go Brrrr From First Principles" (H. He, 2022):
time goes to math (compute), to moving bytes (memory bandwidth), or to everything else
(overhead: Python, dispatch, launches, waiting on data or the host). The roofline class of
each operator (analyze: intensity vs the device's ridge point) splits the operator time;
the time outside operators and the device's idle time are overhead.
"""

from __future__ import annotations

from typing import Final, Literal

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import EvidenceValue

Regime = Literal["compute", "memory", "overhead", "unknown"]

#: Share of step time outside the model's compute (data wait, copies, Python around the
#: phases) from which a job is overhead-bound whatever its operators are: over half the
#: step is not math.
OVERHEAD_MAJORITY: Final = 0.5


def classify_regime(ev: Evidence) -> tuple[Regime, dict[str, EvidenceValue]]:
    """The regime and the numbers it was decided from."""
    evidence: dict[str, EvidenceValue] = {}
    non_model = None
    if ev.steps is not None and ev.steps.phase_fractions:
        pf = ev.steps.phase_fractions
        non_model = pf.get("data_wait", 0.0) + pf.get("h2d", 0.0) + pf.get("other", 0.0)
        evidence["non_model_share"] = round(non_model, 4)
    tr = ev.trace
    if tr is not None and tr.has_device and tr.idle_pct is not None:
        evidence["device_idle_pct"] = round(tr.idle_pct, 2)
        evidence["device_computation_pct"] = round(tr.computation_pct or 0.0, 2)
        if tr.idle_pct / 100.0 >= OVERHEAD_MAJORITY:
            return "overhead", evidence
    if non_model is not None and non_model >= OVERHEAD_MAJORITY:
        return "overhead", evidence
    if tr is not None and tr.time_by_bound:
        shares = dict(tr.time_by_bound)
        for k, v in shares.items():
            evidence[f"{k}_bound_op_time_share"] = round(v, 4)
        best = max(shares, key=lambda k: shares[k])
        # Unclassified op time (no ceilings to place it on the roofline) decides nothing.
        if best != "unknown" and shares[best] > 0:
            return best, evidence
    return "unknown", evidence
