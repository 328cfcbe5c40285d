"""What became of a trial, as a type: the `Outcome` on every trial record.

The tuner decides from a trial's outcome (retry a knob rejected for speed, skip the other values
of a knob that did not act, stack the wins that did not reproduce, search the batch down from
one that ran out of memory), never from the words of its reason: the reason is for people and
may be reworded freely. A trial's `status` and `decision` stay on the record too (they are what
the report and `--json` show); `Outcome.decision` is the decision an outcome goes with, and a
record whose three disagree does not validate.

Records written before the outcome existed carry only their status, decision and reason; they
are read back with the outcome those imply (`legacy_trial_outcome`,
`legacy_confirmation_outcome`), the one place that still reads a reason's words.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal, cast

TrialStatus = Literal["ok", "crash", "oom", "timeout", "nan", "error"]
Decision = Literal["baseline", "kept", "rejected", "failed", "measured"]


class Outcome(StrEnum):
    """What became of one trial (a `TrialResult` or the final `Confirmation`)."""

    #: The baseline recipe, measured alone: the first rung.
    BASELINE = "baseline"
    #: A proven win, kept as the new best.
    KEPT = "kept"
    #: Measured alone and passing the quality check, with no speed verdict (a joint-search
    #: trial; the final A/B's fresh process pairs).
    MEASURED = "measured"
    #: Not proven faster: the A/B's interval did not clear the bar (slower, or no clear
    #: difference by its last look).
    NOT_FASTER = "not_faster"
    #: Proven faster by its first pair of processes, not by a second, fresh pair.
    NOT_REPRODUCED = "not_reproduced"
    #: Its loss trajectory left the baseline's own spread (the quality check).
    QUALITY = "quality"
    #: Its warm-up ran so much slower than the best that it was not measured further.
    FUTILE = "futile"
    #: A changed knob did not act in the script (no DataLoader for num_workers, ...).
    NOT_APPLICABLE = "not_applicable"
    #: Its loss became NaN or infinite.
    NAN = "nan"
    #: A worker process died.
    CRASHED = "crashed"
    #: A worker ran out of memory (the study's cap, or the device's).
    OUT_OF_MEMORY = "out_of_memory"
    #: A worker did not answer in time.
    TIMEOUT = "timeout"
    #: A worker reported an error of its own.
    ERROR = "error"
    #: The final A/B: the budget left time for fewer fresh pairs than an interval needs.
    BUDGET_CUT = "budget_cut"
    #: A step of the memory ladder (`tune --objective fit`) whose measured peak memory is not
    #: clearly below the best's (`tune.fit_decisions.lowers_memory`).
    NO_MEMORY_SAVING = "no_memory_saving"
    #: Measured, and its peak memory is above the cap (`tune --objective fit`): it does not fit.
    OVER_CAP = "over_cap"

    @property
    def decision(self) -> Decision:
        """The decision a `TrialResult` with this outcome records."""
        return _DECISIONS.get(self, "failed")

    @property
    def failed(self) -> bool:
        """Whether the trial failed to measure (its status is not "ok")."""
        return self.decision == "failed"

    @property
    def rejected_for_speed(self) -> bool:
        """A rejection on speed alone: the kind a later change can turn into a win (not
        quality, futility or a knob that did not act, which no later change fixes)."""
        return self in (Outcome.NOT_FASTER, Outcome.NOT_REPRODUCED)


_DECISIONS: Final[dict[Outcome, Decision]] = {
    Outcome.BASELINE: "baseline",
    Outcome.KEPT: "kept",
    Outcome.MEASURED: "measured",
    Outcome.NOT_FASTER: "rejected",
    Outcome.NOT_REPRODUCED: "rejected",
    Outcome.QUALITY: "rejected",
    Outcome.FUTILE: "rejected",
    Outcome.NOT_APPLICABLE: "rejected",
    Outcome.NO_MEMORY_SAVING: "rejected",
    Outcome.OVER_CAP: "rejected",
}

#: A failed worker's kind (`procs.WorkerFailure.kind`) -> its outcome; any other is an error.
_FAILURES: Final[dict[str, Outcome]] = {
    "crash": Outcome.CRASHED,
    "oom": Outcome.OUT_OF_MEMORY,
    "timeout": Outcome.TIMEOUT,
    "nan": Outcome.NAN,
    "error": Outcome.ERROR,
}


def failure_outcome(status: str) -> Outcome:
    """The outcome of a trial whose worker failed with `status` (crash, oom, timeout, ...)."""
    return _FAILURES.get(status, Outcome.ERROR)


#: Reason prefix of a trial whose changed knob did not act in the script.
DOES_NOT_APPLY: Final = "does not apply"
#: Reason prefix of a win the second pair of fresh processes did not bear out.
NOT_REPRODUCED: Final = "not reproduced in fresh processes"
#: Reason of a win kept on its first pair alone (its second pair cut by the budget).
FIRST_PAIR_ONLY: Final = "kept on its first pair of processes"
#: Reason prefix of a quality rejection.
QUALITY: Final = "quality"
#: Reason prefix of a futile candidate.
FUTILE: Final = "futile"
#: Reason prefix of a final A/B the budget cut below an interval's pairs.
BUDGET_CUT: Final = "the budget left time for"


@dataclass(frozen=True)
class Verdict:
    """The decided part of a trial record: its status, decision, outcome and why."""

    status: TrialStatus
    outcome: Outcome
    reason: str = ""
    loss_deviation: float | None = None

    @property
    def decision(self) -> Decision:
        return self.outcome.decision

    @classmethod
    def failure(cls, status: str, reason: str) -> Verdict:
        """A worker's failure (`procs.WorkerFailure`'s kind and reason)."""
        return cls(cast(TrialStatus, status), failure_outcome(status), reason)


def check_consistent(status: str, decision: str | None, outcome: Outcome) -> None:
    """Raise ValueError when a record's status, decision and outcome disagree."""
    if decision is not None and decision != outcome.decision:
        raise ValueError(f"outcome {outcome.value} goes with decision {outcome.decision!r}")
    if not outcome.failed:
        agrees = status == "ok"
    elif outcome is Outcome.BUDGET_CUT:
        agrees = status == "timeout"
    else:
        agrees = status != "ok" and failure_outcome(status) is outcome
    if not agrees:
        raise ValueError(f"outcome {outcome.value} cannot have status {status!r}")


def legacy_trial_outcome(status: str, decision: str, reason: str) -> Outcome:
    """The outcome of a `TrialResult` stored before outcomes were recorded, from its status,
    decision and the reason prefixes the tuner wrote then."""
    if status != "ok":
        return failure_outcome(status)
    if decision in ("baseline", "kept", "measured"):
        return Outcome(decision)
    if decision != "rejected":
        return Outcome.ERROR
    for prefix, outcome in (
        (QUALITY, Outcome.QUALITY),
        (FUTILE, Outcome.FUTILE),
        (DOES_NOT_APPLY, Outcome.NOT_APPLICABLE),
        (NOT_REPRODUCED, Outcome.NOT_REPRODUCED),
    ):
        if reason.startswith(prefix):
            return outcome
    return Outcome.NOT_FASTER


def legacy_confirmation_outcome(status: str, reason: str) -> Outcome:
    """The outcome of a `Confirmation` stored before outcomes were recorded."""
    if status == "ok":
        return Outcome.MEASURED
    if status == "timeout" and reason.startswith(BUDGET_CUT):
        return Outcome.BUDGET_CUT
    return failure_outcome(status)
