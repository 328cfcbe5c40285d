"""Builders of constructed Evidence for rule tests."""

from __future__ import annotations

from typing import Any

from torchdoctor.diagnose.evidence import Evidence, StepEvidence


def phases(**fractions: float) -> StepEvidence:
    full = {p: 0.0 for p in ("data_wait", "h2d", "forward", "backward", "optimizer", "other")}
    full.update(fractions)
    rest = 1.0 - sum(full.values())
    full["forward"] += max(0.0, rest)  # whatever is not named is model time
    return StepEvidence(count=20, measured=15, median_s=0.1, p95_s=0.12, phase_fractions=full)


def evidence(**fields: Any) -> Evidence:
    fields.setdefault("source", "script")
    return Evidence(**fields)
