"""Stage: diagnose. Evidence in, a `Diagnosis` out: the regime, the primary bottleneck and
ranked findings, each with its numbers, prescription and Amdahl bound on the gain.

- `build_evidence_*` adapters turn a ScriptProfile, a RunResult or a TraceAnalysis into the
  source-neutral `Evidence` the rules read;
- `diagnose_evidence(evidence)` runs the rules (`rules/`, one module per rule);
- `diagnose_profile`, `diagnose_trace`, `diagnose_workload` do the whole job for one input.
"""

from torchdoctor.diagnose.diagnosis import Diagnosis, diagnose_evidence, rank_findings
from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import (
    BOTTLENECKS,
    SEVERITY_ORDER,
    Bottleneck,
    Finding,
    Prescription,
    Severity,
    amdahl_bound,
)
from torchdoctor.diagnose.rules import RULES

__all__ = [
    "BOTTLENECKS",
    "RULES",
    "SEVERITY_ORDER",
    "Bottleneck",
    "Diagnosis",
    "Evidence",
    "Finding",
    "Prescription",
    "Severity",
    "amdahl_bound",
    "diagnose_evidence",
    "rank_findings",
]
