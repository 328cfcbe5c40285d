"""Across ranks: each rank's step side by side, the skew at each collective, stragglers.

From the per-rank traces of one job (a folder, or the traces a torchrun launch left):

- each rank's mean step split into data wait, optimizer, backward, forward, exposed
  communication and other (`RankPhases`: each instant once, in that order);
- the k-th collective of each rank matched (by ProfilerStep number and order within the
  step), and for each, who came last and how long the others waited for it (clock-free:
  `CollectiveSkew` says why);
- stragglers: a rank that comes last at most collectives and whose lateness costs the
  others a sizeable share of their step, with the cause read from which of its phases
  exceeds the other ranks' median.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

import numpy as np

from torchdoctor.analyze import intervals as iv
from torchdoctor.analyze.breakdown import is_dataloader_name, is_host_comm_name
from torchdoctor.analyze.devicetime import is_comm_kernel_name
from torchdoctor.analyze.rank_records import (
    CollectiveSkew,
    CrossRankAnalysis,
    RankPhases,
    Straggler,
    StragglerCause,
    straggler_phrase,
)
from torchdoctor.analyze.step_windows import is_step_name, step_windows
from torchdoctor.analyze.timeline import BoolArray, Kind, Timeline

#: A straggler comes last at more than this share of the collectives (a strict majority):
#: lateness that moves from rank to rank is the host's scheduling or the data's variance,
#: not one rank's cause.
STRAGGLER_MIN_LAST_FRACTION: Final = 0.5
#: ... and the others wait for it at least this share of their step: the cut the
#: dataloader_wait rule uses for a step waiting on its input (TensorBoard profiler plugin,
#: "moderately input-bound" from 5%), since the others wait on the straggler as on input.
STRAGGLER_MIN_WAIT_SHARE: Final = 0.05
#: How many matched collectives the record keeps (the statistics use all of them).
MAX_COLLECTIVES_KEPT: Final = 64

_US_PER_MS: Final = 1000.0
_STEP_NUMBER = re.compile(r"ProfilerStep#(\d+)")
_OPTIMIZER_PREFIXES: Final = ("Optimizer.step#", "Optimizer.zero_grad#")
_BACKWARD_PREFIX: Final = "autograd::engine::evaluate_function"
_CAUSE_PHASES: Final[dict[StragglerCause, tuple[str, ...]]] = {
    "data": ("data_wait_ms",),
    "compute": ("forward_ms", "backward_ms"),
    "optimizer": ("optimizer_ms",),
    "other": ("other_ms",),
}


def _name_starts(prefixes: tuple[str, ...]) -> Callable[[str], bool]:
    return lambda name: name.lower().startswith(prefixes)


#: Families of collective events, in order of preference: the one that spans the
#: collective's whole execution on the rank (waiting for peers included) first. The first
#: family every rank's trace holds is matched.
COLLECTIVE_FAMILIES: Final[tuple[tuple[str, tuple[Kind, ...], Callable[[str], bool]], ...]] = (
    ("nccl kernels", (Kind.KERNEL,), is_comm_kernel_name),
    ("gloo:/nccl: annotations", (Kind.USER_ANNOTATION,), _name_starts(("gloo:", "nccl:"))),
    ("c10d:: operators", (Kind.CPU_OP,), _name_starts(("c10d::",))),
    ("record_param_comms", (Kind.CPU_OP, Kind.USER_ANNOTATION), _name_starts(("record_param",))),
)


def _family_mask(tl: Timeline, kinds: tuple[Kind, ...], pred: Callable[[str], bool]) -> BoolArray:
    return tl.mask(*kinds) & tl.name_mask(pred)


def _step_numbers(tl: Timeline) -> tuple[iv.Intervals, list[int | None]]:
    windows = step_windows(tl)
    m = tl.name_mask(is_step_name) & tl.mask(Kind.USER_ANNOTATION, Kind.CPU_OP)
    idx = np.flatnonzero(m)
    idx = idx[np.argsort(tl.ts[idx], kind="stable")]
    numbers: list[int | None] = []
    for i in idx.tolist():
        found = _STEP_NUMBER.search(tl.names[tl.name_id[i]])
        numbers.append(int(found.group(1)) if found else None)
    return windows, numbers


def _union_of(tl: Timeline, mask: BoolArray) -> iv.Intervals:
    return iv.union(tl.ts[mask], tl.end[mask])


def rank_phases(tl: Timeline, rank: int, comm: BoolArray, wait_ms: float) -> RankPhases:
    """The rank's mean step over its ProfilerStep windows (the whole trace without any)."""
    windows = step_windows(tl)
    if windows[0].size == 0:
        windows = (np.array([0.0]), np.array([float(tl.end.max()) if len(tl) else 0.0]))
    host = tl.mask(Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)
    not_step = ~tl.name_mask(is_step_name)
    ops = (tl.mask(Kind.CPU_OP) | tl.mask(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)) & not_step
    ops &= ~comm & ~tl.name_mask(is_host_comm_name)
    parts = {
        "data_wait_ms": _union_of(tl, host & not_step & tl.name_mask(is_dataloader_name)),
        "optimizer_ms": _union_of(
            tl, host & tl.name_mask(lambda n: n.startswith(_OPTIMIZER_PREFIXES))
        ),
        "backward_ms": _union_of(
            tl, tl.mask(Kind.CPU_OP) & tl.name_mask(lambda n: n.startswith(_BACKWARD_PREFIX))
        ),
        "forward_ms": _union_of(tl, ops),
        "exposed_comm_ms": _union_of(tl, comm),
    }
    comm_all = parts["exposed_comm_ms"]
    totals = dict.fromkeys(parts, 0.0)
    comm_total = 0.0
    for lo, hi in zip(windows[0].tolist(), windows[1].tolist(), strict=True):
        taken = iv.empty()
        for key, spans in parts.items():
            piece = iv.subtract(iv.clip(spans, lo, hi), taken)
            totals[key] += iv.length(piece)
            taken = iv.union(
                np.concatenate((taken[0], piece[0])), np.concatenate((taken[1], piece[1]))
            )
        comm_total += iv.length(iv.clip(comm_all, lo, hi))
    n = int(windows[0].size)
    step = float(np.sum(windows[1] - windows[0])) / n
    mean = {k: v / n / _US_PER_MS for k, v in totals.items()}
    return RankPhases(
        rank=rank,
        steps=n,
        step_ms=step / _US_PER_MS,
        other_ms=max(0.0, step / _US_PER_MS - sum(mean.values())),
        comm_ms=comm_total / n / _US_PER_MS,
        wait_ms=wait_ms,
        **mean,
    )


def _collectives(
    tl: Timeline, mask: BoolArray
) -> dict[tuple[int | None, int], tuple[str, float, float]]:
    """(step number, order within the step) -> (name, duration, absolute start; us)."""
    windows, numbers = _step_numbers(tl)
    idx = np.flatnonzero(mask)
    idx = idx[np.argsort(tl.ts[idx], kind="stable")]
    found: dict[tuple[int | None, int], tuple[str, float, float]] = {}
    counts: dict[int | None, int] = {}
    for i in idx.tolist():
        step: int | None = None
        if windows[0].size:
            w = int(np.searchsorted(windows[0], tl.ts[i], side="right")) - 1
            if w < 0 or tl.ts[i] > windows[1][w]:
                continue  # outside the profiled steps: not comparable across ranks
            step = numbers[w] if numbers[w] is not None else w
        k = counts.get(step, 0)
        counts[step] = k + 1
        found[(step, k)] = (tl.names[tl.name_id[i]], float(tl.dur[i]), tl.base_us + tl.ts[i])
    return found


def _rank_of(tl: Timeline, position: int) -> int:
    return tl.meta.rank if tl.meta.rank is not None else position


def cross_rank_analysis(timelines: Sequence[Timeline]) -> CrossRankAnalysis | None:
    """Compare the ranks of one job (one timeline per rank); None for fewer than two."""
    if len(timelines) < 2:
        return None
    ranks = [_rank_of(tl, i) for i, tl in enumerate(timelines)]
    notes: list[str] = []
    if len(set(ranks)) != len(ranks):
        notes.append("the traces name the same rank twice; ranks are taken in file order")
        ranks = list(range(len(timelines)))
    family = next(
        (
            f
            for f in COLLECTIVE_FAMILIES
            if all(_family_mask(t, f[1], f[2]).any() for t in timelines)
        ),
        None,
    )
    masks = [
        _family_mask(t, family[1], family[2]) if family else np.zeros(len(t), dtype=bool)
        for t in timelines
    ]
    skews: list[CollectiveSkew] = []
    hosts = {t.meta.host_name for t in timelines}
    shared_clock = len(hosts) == 1 and None not in hosts
    if family is None:
        notes.append("no collective found in every rank's trace: no skew to measure")
    else:
        per_rank = [_collectives(t, m) for t, m in zip(timelines, masks, strict=True)]
        keys = sorted(set.intersection(*(set(p) for p in per_rank)), key=_key_order)
        counts = {len(p) for p in per_rank}
        if not keys and len(counts) == 1:
            # The step numbers differ (each rank counted its steps from its own start) but
            # every rank traced as many collectives: the k-th of each is the same one.
            per_rank = [
                {(None, k): p[key] for k, key in enumerate(sorted(p, key=_key_order))}
                for p in per_rank
            ]
            keys = sorted(per_rank[0], key=_key_order)
            notes.append("the ranks' step numbers differ: collectives matched by order")
        if len(keys) < max(len(p) for p in per_rank):
            notes.append(
                f"{len(keys)} collectives matched on every rank out of up to "
                f"{max(len(p) for p in per_rank)} on one: the ranks' traces cover different steps"
            )
        for n, key in enumerate(keys):
            skews.append(_skew(n, key, [p[key] for p in per_rank], ranks, shared_clock))
    waits = [sum(s.waits_ms[i] for s in skews) for i in range(len(ranks))]
    phases = []
    for i, (tl, mask) in enumerate(zip(timelines, masks, strict=True)):
        steps = max(1, step_windows(tl)[0].size)
        phases.append(rank_phases(tl, ranks[i], mask, waits[i] / steps))
    skew_values = [s.skew_ms for s in skews]
    return CrossRankAnalysis(
        world_size=max([len(ranks)] + [t.meta.world_size for t in timelines if t.meta.world_size]),
        ranks=phases,
        collective_events=family[0] if family else None,
        skew_method=("clock" if shared_clock else "duration") if skews else None,
        collectives_matched=len(skews),
        collectives=skews[:MAX_COLLECTIVES_KEPT],
        median_skew_ms=float(np.median(skew_values)) if skew_values else None,
        max_skew_ms=max(skew_values) if skew_values else None,
        stragglers=find_stragglers(phases, skews),
        notes=notes,
    )


def _key_order(key: tuple[int | None, int]) -> tuple[int, int]:
    return (key[0] if key[0] is not None else -1, key[1])


def _skew(
    index: int,
    key: tuple[int | None, int],
    seen: Sequence[tuple[str, float, float]],
    ranks: Sequence[int],
    shared_clock: bool,
) -> CollectiveSkew:
    """One collective across the ranks (`CollectiveSkew` says how arrivals are told)."""
    durs = [d / _US_PER_MS for _, d, _ in seen]
    if shared_clock:
        starts = [t / _US_PER_MS for _, _, t in seen]
        last = int(np.argmax(starts))
        waits = [min(d, starts[last] - t) for d, t in zip(durs, starts, strict=True)]
        skew = starts[last] - min(starts)
    else:
        last = int(np.argmin(durs))
        waits = [d - durs[last] for d in durs]
        skew = max(durs) - durs[last]
    return CollectiveSkew(
        index=index,
        step=key[0],
        name=seen[0][0],
        durations_ms=[round(d, 4) for d in durs],
        waits_ms=[round(max(0.0, w), 4) for w in waits],
        last_rank=ranks[last],
        skew_ms=round(skew, 4),
    )


def find_stragglers(
    phases: Sequence[RankPhases], skews: Sequence[CollectiveSkew]
) -> list[Straggler]:
    """Ranks the others wait for (thresholds above), each with its cause; most costly first."""
    if not skews or len(phases) < 2:
        return []
    found: list[Straggler] = []
    for p in phases:
        late = [s for s in skews if s.last_rank == p.rank]
        fraction = len(late) / len(skews)
        if fraction <= STRAGGLER_MIN_LAST_FRACTION:
            continue
        others = [q for q in phases if q.rank != p.rank]
        step = float(np.median([q.step_ms for q in others]))
        imposed = sum(s.skew_ms for s in late) / max(1, p.steps)
        share = min(1.0, imposed / step) if step > 0 else 0.0
        if share < STRAGGLER_MIN_WAIT_SHARE:
            continue
        excess = {
            cause: sum(getattr(p, f) for f in fields)
            - float(np.median([sum(getattr(q, f) for f in fields) for q in others]))
            for cause, fields in _CAUSE_PHASES.items()
        }
        cause = max(excess, key=lambda c: excess[c])
        found.append(
            Straggler(
                rank=p.rank,
                cause=cause,
                phrase=straggler_phrase(p.rank, cause),
                last_fraction=round(fraction, 4),
                imposed_wait_ms=round(imposed, 4),
                wait_share=round(share, 4),
                excess_ms={k: round(v, 4) for k, v in excess.items()},
            )
        )
    return sorted(found, key=lambda s: -s.imposed_wait_ms)
