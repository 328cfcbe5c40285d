"""`Finding`: one rule's verdict, with its evidence, prescription and Amdahl bound on the gain.

The bound. A finding addresses a share `f` of the step time (the data wait, the optimizer
phase, ...). If the fix makes that share `s` times faster, Amdahl's law bounds the whole step's
speedup by

    bound = 1 / (1 - f * (1 - 1/s))

and when the fix can remove the share entirely (s -> infinity: hiding the data wait behind
compute, deleting a per-step sync) the bound is the limit `1 / (1 - f)`. Each finding records
which of the two it used (`local_speedup` is None for the limit), so the number is never an
unexplained promise. Both are *upper* bounds: overlap and second-order effects only lower them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar, Final, Literal

from pydantic import Field

from torchdoctor.core.records import Record, SubRecord

Severity = Literal["high", "medium", "low", "info"]
SEVERITY_ORDER: Final[dict[Severity, int]] = {"high": 3, "medium": 2, "low": 1, "info": 0}

Bottleneck = Literal[
    "data_loading",
    "host_device_transfer",
    "host_sync",
    "framework_overhead",
    "compute",
    "memory_bandwidth",
    "optimizer",
    "communication",
    "other_host",
]
#: Every bottleneck category, in the tie-breaking order of `primary.select_primary`: when two
#: categories address the same share, the one earlier here wins, because it is cheaper to fix
#: (input pipeline and sync fixes are a line of code; compute needs a different algorithm).
BOTTLENECKS: Final[tuple[Bottleneck, ...]] = (
    "data_loading",
    "host_device_transfer",
    "host_sync",
    "communication",
    "optimizer",
    "framework_overhead",
    "memory_bandwidth",
    "compute",
    "other_host",
)

#: Share of step time from which a finding is high severity: a fix bounded by at least 1.33x
#: (1/(1-0.25)) is worth doing before anything else. Same order as the TensorBoard profiler
#: plugin's input-bound threshold (its "highly input-bound" cut is 20% of step time,
#: tensorboard_plugin_profile input_pipeline_analyzer).
HIGH_SHARE: Final = 0.25
#: Share from which a finding is medium: a bound of at least ~1.11x.
MEDIUM_SHARE: Final = 0.10
#: Share from which a finding is low rather than info: a bound of ~1.03x, the size of the
#: smallest effect the tuner can prove on a quiet machine.
LOW_SHARE: Final = 0.03

EvidenceValue = float | int | str | bool | None


def amdahl_bound(share: float, local_speedup: float | None = None) -> float:
    """Upper bound on the whole-step speedup from speeding up `share` of it by `local_speedup`.

    `local_speedup=None` means the share can be removed entirely: the limit 1/(1-f).
    """
    f = min(max(share, 0.0), 1.0)
    if local_speedup is None or math.isinf(local_speedup):
        return math.inf if f >= 1.0 else 1.0 / (1.0 - f)
    s = max(local_speedup, 1.0)
    return 1.0 / (1.0 - f * (1.0 - 1.0 / s))


def severity_for_share(share: float) -> Severity:
    """Severity from the share of step time a finding addresses (thresholds above)."""
    if share >= HIGH_SHARE:
        return "high"
    if share >= MEDIUM_SHARE:
        return "medium"
    if share >= LOW_SHARE:
        return "low"
    return "info"


class Prescription(SubRecord):
    """What to change: knob settings from the catalogue, and the code change in words.

    A change no knob can make (an algorithm written another way) is handed back, not
    measured: `site` is the `file:line` it applies at when the evidence names one, and
    `snippet` the code to put there.
    """

    knobs: dict[str, int | bool | str | None] = Field(default_factory=dict)
    code_change: str
    site: str | None = None
    snippet: str | None = None


class Finding(Record):
    """One rule's verdict on one job."""

    schema_name: ClassVar[str] = "finding"
    #: Version 2: the prescription's `site` and `snippet`. Older records still read.
    schema_version: ClassVar[int] = 2

    rule_id: str
    title: str
    summary: str = Field(description="one sentence: what was seen and why it matters")
    severity: Severity
    bottleneck: Bottleneck
    share: float = Field(ge=0, le=1, description="fraction f of step time the fix addresses")
    local_speedup: float | None = Field(
        default=None, description="assumed speedup s of that share; None: removed entirely"
    )
    amdahl_bound: float = Field(ge=1)
    evidence: dict[str, EvidenceValue] = Field(default_factory=dict)
    prescription: Prescription
    confidence: float = Field(ge=0, le=1)


def make_finding(
    *,
    rule_id: str,
    title: str,
    summary: str,
    bottleneck: Bottleneck,
    share: float,
    evidence: Mapping[str, EvidenceValue],
    prescription: Prescription,
    confidence: float,
    local_speedup: float | None = None,
    severity: Severity | None = None,
) -> Finding:
    """Build a finding whose bound and (unless given) severity follow from its share."""
    share = min(max(share, 0.0), 1.0)
    bound = amdahl_bound(share, local_speedup)
    # A share of exactly 1 would make the limit infinite; JSON cannot carry it, and no fix
    # removes the whole step, so cap the reported bound at the largest finite float.
    bound = min(bound, 1e9)
    effective = 1.0 - 1.0 / bound  # the share the bound corresponds to, for severity
    return Finding(
        rule_id=rule_id,
        title=title,
        summary=summary,
        severity=severity or severity_for_share(effective),
        bottleneck=bottleneck,
        share=share,
        local_speedup=local_speedup,
        amdahl_bound=bound,
        evidence=dict(evidence),
        prescription=prescription,
        confidence=min(max(confidence, 0.0), 1.0),
    )
