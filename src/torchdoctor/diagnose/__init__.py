"""Stage: diagnose. Evidence in, a `Diagnosis` out: the regime, the primary bottleneck and
ranked findings, each with its numbers, prescription and Amdahl bound on the gain.

- `build_evidence_*` adapters turn a ScriptProfile, a RunResult or a TraceAnalysis into the
  source-neutral `Evidence` the rules read;
- `diagnose_evidence(evidence)` runs the rules (`rules/`, one module per rule);
- `diagnose_profile`, `diagnose_trace`, `diagnose_workload` do the whole job for one input;
- `diff_inputs(a, b)` -> `RunDiff`: what changed between two runs, tuning results or traces
  (diagnose/diff.py; the inputs are read in diagnose/diff_sources.py);
- `examine_script`, `examine_trace`, `examine_workload` do it leaving a run folder behind;
  a torchrun job or a folder of per-rank traces gives one `JobDiagnosis` (diagnose/ranks.py:
  the ranks compared, a straggler's wait attributed to it).
  They are loaded on first use: examining measures the machine (measure/), which reading a
  diagnosis does not need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.core.lazy import lazy_getattr
from torchdoctor.diagnose.diagnosis import Diagnosis, diagnose_evidence, rank_findings
from torchdoctor.diagnose.evidence import DataLoaderEvidence, DistributedEvidence, Evidence
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

if TYPE_CHECKING:
    from torchdoctor.diagnose.diff import RunDiff, diff_inputs
    from torchdoctor.diagnose.examine import (
        examine_profile,
        examine_script,
        examine_trace,
        examine_workload,
    )
    from torchdoctor.diagnose.ranks import JobDiagnosis
    from torchdoctor.diagnose.step_evidence import steady_steps

_LAZY_EXPORTS = {
    "RunDiff": "torchdoctor.diagnose.diff",
    "diff_inputs": "torchdoctor.diagnose.diff",
    "examine_profile": "torchdoctor.diagnose.examine",
    "examine_script": "torchdoctor.diagnose.examine",
    "examine_trace": "torchdoctor.diagnose.examine",
    "examine_workload": "torchdoctor.diagnose.examine",
    "JobDiagnosis": "torchdoctor.diagnose.ranks",
    "steady_steps": "torchdoctor.diagnose.step_evidence",
}

__all__ = [
    "BOTTLENECKS",
    "RULES",
    "SEVERITY_ORDER",
    "Bottleneck",
    "DataLoaderEvidence",
    "Diagnosis",
    "DistributedEvidence",
    "Evidence",
    "Finding",
    "JobDiagnosis",
    "Prescription",
    "RunDiff",
    "Severity",
    "amdahl_bound",
    "diagnose_evidence",
    "diff_inputs",
    "examine_profile",
    "examine_script",
    "examine_trace",
    "examine_workload",
    "rank_findings",
    "steady_steps",
]

__getattr__ = lazy_getattr(__name__, _LAZY_EXPORTS)
