"""What the tuner says about comparisons that ran while the machine was disturbed.

A trial whose comparison was disturbed by other work (`core.load`) is measured again
(`tune.arms.interleave_until_clear`, `MeasurePlan.remeasures` times at most); these notes tell the
user which trials needed it and which still ran disturbed, so a decision taken on a busy
machine is not mistaken for one taken on a quiet machine.
"""

from __future__ import annotations

from collections.abc import Iterable

from torchdoctor.tune.records import Trial, TrialResult


def _name(trial: TrialResult) -> str:
    return ", ".join(f"{k}={v}" for k, v in trial.change.items()) or trial.kind


def disturbed_notes(records: Iterable[Trial]) -> list[str]:
    """Warnings for the result's notes: re-measured trials, and those still disturbed."""
    trials = [t for t in records if isinstance(t, TrialResult)]
    notes = []
    again = [t for t in trials if t.remeasured and not t.disturbed]
    if again:
        names = "; ".join(f"{_name(t)} ({t.remeasured}x)" for t in again)
        notes.append(
            "warning: the machine was disturbed by other work during these comparisons, "
            f"which were measured again on a quiet machine: {names}"
        )
    still = [t for t in trials if t.disturbed]
    if still:
        worst = max(t.machine_load.other_cores for t in still if t.machine_load is not None)
        names = "; ".join(f"{_name(t)} ({t.decision})" for t in still)
        notes.append(
            f"warning: machine disturbed: other processes used up to {worst:.2f} CPU cores "
            f"during these comparisons even after measuring them again: {names}; their "
            "decisions were taken on a busy machine, tune again when it is quiet"
        )
    return notes
