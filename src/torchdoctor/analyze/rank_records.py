"""The records of the cross-rank analysis (`analyze.ranks`): a job's ranks side by side.

`CrossRankAnalysis` is versioned on its own, because a folder of per-rank traces and a
torchrun launch both produce it, and a `TraceAnalysis` or a job's diagnosis carries it.
"""

from __future__ import annotations

from typing import ClassVar, Final, Literal

from pydantic import Field

from torchdoctor.core.records import Record, SubRecord

#: What holds a straggler back, read from which of its phases exceeds the other ranks':
#: data (its input pipeline), compute (forward + backward), optimizer, other (host Python).
StragglerCause = Literal["data", "compute", "optimizer", "other"]


class RankPhases(SubRecord):
    """One rank's mean step, in milliseconds, from its trace's profiled steps.

    Each instant of a step counts once, in this order: data wait, optimizer, backward,
    forward (any other operator), exposed communication (communication no operator
    overlaps), other. `wait_ms` is the part of its communication spent waiting for a later
    rank to arrive at the collectives (see `CollectiveSkew`); `comm_ms` all of it.
    """

    rank: int
    steps: int = Field(ge=0)
    step_ms: float
    data_wait_ms: float
    forward_ms: float
    backward_ms: float
    exposed_comm_ms: float
    optimizer_ms: float
    other_ms: float
    comm_ms: float
    wait_ms: float


#: How arrivals were told apart: by the ranks' shared clock (traces of one host), or by
#: durations alone (several hosts, whose clocks may differ by more than the skew).
SkewMethod = Literal["clock", "duration"]


class CollectiveSkew(SubRecord):
    """The k-th collective of every rank: when each arrived, who came last, the wait.

    With a shared clock (`clock`: every trace names the same host), a rank arrives when its
    collective starts; the last arriver starts last, and each rank waits from its start to
    the last one's (at most its own duration). Without one (`duration`), a collective is
    taken to complete at about the same moment on every rank, so the rank that lasted
    longest arrived first and the shortest last, and each waits its duration's excess over
    the shortest. `skew_ms` is the last arrival's lag behind the first.
    """

    index: int
    step: int | None = Field(description="the ProfilerStep number it ran in; None without steps")
    name: str
    durations_ms: list[float] = Field(description="per rank, in the order of `ranks`")
    waits_ms: list[float] = Field(description="per rank: its wait for the last arriver")
    last_rank: int
    skew_ms: float


#: How a straggler's cause reads after "rank N".
CAUSE_WORDS: Final[dict[str, str]] = {
    "data": "waits on data",
    "compute": "computes slower",
    "optimizer": "spends longer in its optimizer",
    "other": "spends longer outside the model (host Python)",
}


def straggler_phrase(rank: int, cause: StragglerCause) -> str:
    """'rank 1 waits on data', 'rank 1 computes slower', ..."""
    return f"rank {rank} {CAUSE_WORDS[cause]}"


class Straggler(SubRecord):
    """A rank the others wait for at most collectives, and why it is late."""

    rank: int
    cause: StragglerCause
    phrase: str = Field(description="the cause in words: 'rank 1 waits on data'")
    last_fraction: float = Field(ge=0, le=1, description="share of collectives it came last")
    imposed_wait_ms: float = Field(description="per step, what the others wait for it")
    wait_share: float = Field(ge=0, le=1, description="that wait's share of the others' step")
    excess_ms: dict[str, float] = Field(
        description="its data, compute, optimizer and other time per step minus the median "
        "of the other ranks'"
    )


class CrossRankAnalysis(Record):
    """A job's ranks compared: each rank's step, the skew at each collective, stragglers."""

    schema_name: ClassVar[str] = "cross_rank"
    schema_version: ClassVar[int] = 1

    world_size: int
    ranks: list[RankPhases]
    collective_events: str | None = Field(
        description="which events were matched as collectives (e.g. 'gloo:', 'nccl kernels')"
    )
    skew_method: SkewMethod | None = None
    collectives_matched: int = 0
    collectives: list[CollectiveSkew] = Field(
        default_factory=list, description="the first `MAX_COLLECTIVES_KEPT` matched"
    )
    median_skew_ms: float | None = None
    max_skew_ms: float | None = None
    stragglers: list[Straggler] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def rank_phases(self, rank: int) -> RankPhases | None:
        return next((r for r in self.ranks if r.rank == rank), None)
