"""A distributed job's diagnosis: its ranks inside, and the wait for a straggler given to it.

A rank that waits at the all-reduce for a late rank spends that time inside its backward
(DDP waits for the gradient all-reduce there) and, in its trace, in communication (under
FSDP, in the all-gathers and reduce-scatters it leaves exposed); diagnosed
alone, it blames the network or its own backward. Here each waiting rank's evidence has the
wait it measured (analyze.ranks) taken out of those two and handed to the `rank_straggler`
rule, which names the straggler and its cause; the job's diagnosis is the one seen from the
rank that waits most, so its primary bottleneck is the straggler's cause.

The wait share comes from the traced steps and is taken from phases measured over all the
steps: both are means of one steady state, so the approximation is the steps' spread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import Field

from torchdoctor.analyze import CrossRankAnalysis, FsdpAnalysis
from torchdoctor.core.records import Record
from torchdoctor.diagnose.diagnosis import Diagnosis, diagnose_evidence
from torchdoctor.diagnose.evidence import Evidence, StragglerEvidence, TraceEvidence


class JobDiagnosis(Record):
    """One diagnosis of a distributed job: the job's, each rank's, and the ranks compared."""

    schema_name: ClassVar[str] = "job_diagnosis"
    schema_version: ClassVar[int] = 1

    target: str
    world_size: int
    job: Diagnosis = Field(description="the job as a whole (rank None): what to fix first")
    ranks: list[Diagnosis] = Field(description="each rank's, a straggler's wait attributed")
    cross_rank: CrossRankAnalysis | None = Field(
        description="the ranks compared; None when they could not be (a rank left no trace)"
    )
    notes: list[str] = Field(default_factory=list)


def straggler_for(cross: CrossRankAnalysis, rank: int | None) -> StragglerEvidence | None:
    """The costliest straggler other than `rank`, with `rank`'s own wait share for it."""
    s = next((s for s in cross.stragglers if s.rank != rank), None)
    if s is None:
        return None
    own = cross.rank_phases(rank) if rank is not None else None
    share = own.wait_ms / own.step_ms if own is not None and own.step_ms > 0 else s.wait_share
    return StragglerEvidence(
        rank=s.rank,
        cause=s.cause,
        phrase=s.phrase,
        wait_share=min(1.0, max(0.0, share)),
        imposed_wait_ms=s.imposed_wait_ms,
        last_fraction=s.last_fraction,
        excess_ms=s.excess_ms.get(s.cause, 0.0),
        world_size=cross.world_size,
    )


def _less(value: float | None, by: float, scale: float = 1.0) -> float | None:
    return None if value is None else max(0.0, value - by * scale) or None


def attribute_wait(ev: Evidence, straggler: StragglerEvidence) -> Evidence:
    """`ev` with its wait for `straggler` moved out of backward and communication."""
    w = straggler.wait_share
    update: dict[str, Any] = {"straggler": straggler}
    if ev.steps is not None and ev.steps.phase_fractions:
        phases = dict(ev.steps.phase_fractions)
        phases["backward"] = max(0.0, phases.get("backward", 0.0) - w)
        update["steps"] = ev.steps.model_copy(update={"phase_fractions": phases})
    tr: TraceEvidence | None = ev.trace
    if tr is not None:
        breakdown = dict(tr.step_breakdown)
        if "Communication" in breakdown:
            breakdown["Communication"] = max(0.0, breakdown["Communication"] - w)
        update["trace"] = tr.model_copy(
            update={
                "comm_share": _less(tr.comm_share, w),
                "comm_exposed_share": _less(tr.comm_exposed_share, w),
                "exposed_comm_pct": _less(tr.exposed_comm_pct, w, 100.0),
                "step_breakdown": breakdown,
            }
        )
    if ev.fsdp is not None:
        update["fsdp"] = fsdp_less_wait(ev.fsdp, w)
    note = (
        f"{w:.0%} of this rank's step is its wait for rank {straggler.rank} at the "
        "collectives: counted to that rank (rank_straggler), not to communication or backward"
    )
    return ev.model_copy(update={**update, "notes": [*ev.notes, note]})


def fsdp_less_wait(f: FsdpAnalysis, wait_share: float) -> FsdpAnalysis:
    """`f` with a straggler's wait (`wait_share` of the step) taken out of its exposed
    communication, each kind in proportion to its exposed time: the wait happens inside the
    collectives the rank waits at, which the trace does not tell apart from the transfer."""
    if f.exposed_comm_ms <= 0:
        return f
    keep = max(0.0, 1.0 - wait_share * f.step_ms / f.exposed_comm_ms)
    scaled = (
        "exposed_all_gather_ms",
        "exposed_forward_all_gather_ms",
        "exposed_backward_all_gather_ms",
        "exposed_reduce_scatter_ms",
        "exposed_comm_ms",
    )
    units = [
        u.model_copy(
            update={
                k: getattr(u, k) * keep
                for k in ("forward_exposed_ms", "backward_exposed_ms", "reduce_scatter_exposed_ms")
            }
        )
        for u in f.units
    ]
    return f.model_copy(update={**{k: getattr(f, k) * keep for k in scaled}, "units": units})


def attribute_ranks(
    evidence: Sequence[Evidence], cross: CrossRankAnalysis | None
) -> list[Evidence]:
    """Each rank's evidence, its wait for a straggler (if any) attributed."""
    if cross is None:
        return list(evidence)
    out = []
    for i, ev in enumerate(evidence):  # traces that name no rank are ranks by position
        s = straggler_for(cross, ev.rank if ev.rank is not None else i)
        out.append(attribute_wait(ev, s) if s is not None and s.wait_share > 0 else ev)
    return out


def diagnose_ranks(
    evidence: Sequence[Evidence],
    cross: CrossRankAnalysis | None,
    *,
    environment: Mapping[str, Any] | None = None,
) -> list[Diagnosis]:
    """Diagnose each rank with its wait for a straggler attributed."""
    return [
        diagnose_evidence(ev, environment=environment) for ev in attribute_ranks(evidence, cross)
    ]


def job_diagnosis(
    ranks: Sequence[Diagnosis],
    cross: CrossRankAnalysis | None,
    *,
    target: str,
    notes: Sequence[str] = (),
) -> JobDiagnosis:
    """The job: the rank diagnosis that waits most for a straggler (else the lowest rank's),
    as the whole job's (rank None). Without `cross` (the ranks could not be compared), the
    lowest rank's, and `notes` say why."""
    if not ranks:
        raise ValueError("a job diagnosis needs at least one rank's diagnosis")

    def waited(d: Diagnosis) -> float:
        f = d.finding("rank_straggler")
        return f.share if f is not None else 0.0

    view = max(ranks, key=lambda d: (waited(d), -(d.rank or 0)))
    world = cross.world_size if cross is not None else max(len(ranks), view.world_size or 0)
    seen = [f"the job seen from rank {view.rank}"] if view.rank is not None else []
    for s in cross.stragglers if cross is not None else []:
        seen.append(
            f"{s.phrase}: the others wait {s.imposed_wait_ms:.1f} ms per step for it "
            f"({s.wait_share:.0%} of their step)"
        )
    job = view.model_copy(
        update={
            "rank": None,
            "world_size": world,
            "target": target,
            "notes": [*seen, *notes, *view.notes],
        }
    )
    return JobDiagnosis(
        target=target,
        world_size=world,
        job=job,
        ranks=list(ranks),
        cross_rank=cross,
        notes=[*notes, *(cross.notes if cross is not None else [])],
    )
