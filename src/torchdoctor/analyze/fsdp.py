"""FSDP2 in one rank's trace: each unit's all-gathers and reduce-scatters, hidden or exposed.

`fully_shard` marks its work with `record_function` ranges named after the unit's module
(torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py): `FSDP::all_gather (blocks.3)`
around the issue of an all-gather, `FSDP::post_backward_reduce (blocks.3)` around the
gradients' reduce-scatter, `FSDP::forward_prefetch for blocks.4` / `backward_prefetch` around an
all-gather issued ahead of its unit, `FSDP::pre_backward (...)` around a unit's backward entry,
`FSDP::post_forward` / `FSDP::post_backward_reshard` where it frees its unsharded parameters.
The root's names carry no module ("FSDP::all_gather").

Inside each issue range a `c10d::` operator records the collective's tensors (their shapes
and dtype). On gloo the collective itself runs on the process group's own threads, each run
marked `gloo:all_gather` / `gloo:all_reduce` (gloo reduces a `reduce_scatter_tensor` by an
all-reduce of the whole buffer); these are matched to the issuing calls in order, kind by
kind (a process group runs its work in the order it was queued). A collective then spans
from its issue to the end of its run; the part of that span in which the rank's main thread
computes (an `aten::` operator outside FSDP's own ranges) is hidden, the rest exposed: the
main thread waited for it, or spent it in FSDP's copies in and out. Without the gloo runs
(another backend), the issuing call alone is the span, and a note says so.

A unit is unsharded from its all-gather to the reshard that follows (`post_forward` when it
is gathered again in backward, else `post_backward_reshard`); the most bytes held at once
over the steps is the unsharded peak.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from torchdoctor.analyze import intervals as iv
from torchdoctor.analyze.fsdp_records import ROOT, FsdpAnalysis, FsdpUnit
from torchdoctor.analyze.shapes import OP_DTYPES
from torchdoctor.analyze.step_windows import in_windows, is_step_name, step_windows
from torchdoctor.analyze.timeline import Kind, Timeline

_US_PER_MS: Final = 1000.0

_SUFFIX = r"(?: \((?P<fqn>[^)]*)\))?(?: \[pg=\d+\])?$"
_ALL_GATHER = re.compile(r"^FSDP::all_gather" + _SUFFIX)
_REDUCE = re.compile(r"^FSDP::post_backward_reduce" + _SUFFIX)
_PRE_BACKWARD = re.compile(r"^FSDP::pre_backward" + _SUFFIX)
_POST_FORWARD = re.compile(r"^FSDP::post_forward" + _SUFFIX)
_RESHARD = re.compile(r"^FSDP::post_backward_reshard" + _SUFFIX)
_PREFETCH = re.compile(r"^FSDP::(?:forward|backward)_prefetch for ")
_FSDP_PREFIX: Final = "FSDP::"
_COMPUTE_PREFIX: Final = "aten::"
#: Issuing calls (c10d:: operators) and the communication thread's runs, by collective kind.
_ISSUE_KINDS: Final = {"all_gather": ("allgather", "all_gather"), "reduce": ("reduce_scatter",)}
_RUN_KINDS: Final = {
    "all_gather": ("gloo:all_gather", "nccl:all_gather"),
    "reduce": ("gloo:all_reduce", "gloo:reduce_scatter", "nccl:reduce_scatter"),
}


#: The FSDP ranges on the main thread whose name a pattern matches, sorted by start.
_Ranges = Callable[[re.Pattern[str]], list[int]]


def _issues(words: tuple[str, ...]) -> Callable[[str], bool]:
    return lambda n: n.startswith("c10d::") and any(w in n for w in words)


def _runs(prefixes: tuple[str, ...]) -> Callable[[str], bool]:
    return lambda n: n.startswith(prefixes)


def _unit(match: re.Match[str]) -> str:
    return match.group("fqn") or ROOT


@dataclass
class _Collective:
    unit: str
    kind: str  # "all_gather" or "reduce"
    issue: float
    run_start: float
    run_end: float
    backward: bool = False
    prefetched: bool = False
    dtype: str | None = None
    unsharded_bytes: int | None = None
    exposed: iv.Intervals = field(default_factory=iv.empty)
    hidden_us: float = 0.0


def unsharded_bytes(nbytes: float, world_size: int) -> int | None:
    """The whole (unsharded) buffer of an all-gather or reduce-scatter from its operator's byte
    estimate. The `c10d::` operator records the whole buffer and one rank's shard, W times
    smaller; `shapes.op_bytes` sums its tensors and adds the largest as an output:
    whole + whole / W + whole = whole (2W + 1) / W."""
    if not np.isfinite(nbytes) or nbytes <= 0 or world_size < 1:
        return None
    return round(nbytes * world_size / (2 * world_size + 1))


def _main_thread(tl: Timeline) -> tuple[int, int] | None:
    """(pid, tid) of the thread holding the ProfilerStep ranges (else the first FSDP range)."""
    host = tl.mask(Kind.USER_ANNOTATION, Kind.CPU_OP)
    for pred in (is_step_name, lambda n: n.startswith(_FSDP_PREFIX)):
        idx = np.flatnonzero(host & tl.name_mask(pred))
        if idx.size:
            i = int(idx[np.argmin(tl.ts[idx])])
            return int(tl.pid[i]), int(tl.tid[i])
    return None


def _sorted(tl: Timeline, mask: np.ndarray) -> list[int]:
    idx = np.flatnonzero(mask)
    return [int(i) for i in idx[np.argsort(tl.ts[idx], kind="stable")]]


def _inside(starts: np.ndarray, ends: np.ndarray, t: float) -> bool:
    """Whether `t` lies in one of the ranges (starts sorted; ranges may nest)."""
    k = int(np.searchsorted(starts, t, side="right"))
    return bool(k and np.any(ends[:k] >= t))


def _backward_starts(pre_backward: np.ndarray, windows: iv.Intervals) -> np.ndarray:
    """Per step window, the start of its first `FSDP::pre_backward` range (inf without one):
    every all-gather issued from then on in the step is a backward one. A prefetch issued
    from a unit's backward entry may start just after that unit's own range ends."""
    first = np.full(windows[0].size, np.inf)
    w = np.searchsorted(windows[0], pre_backward, side="right") - 1
    for k, t in zip(w.tolist(), pre_backward.tolist(), strict=True):
        if k >= 0 and t <= windows[1][k]:
            first[k] = min(first[k], t)
    return first


def _ranges(tl: Timeline, idx: list[int]) -> tuple[np.ndarray, np.ndarray]:
    return tl.ts[idx], tl.end[idx]


def fsdp_analysis(tl: Timeline) -> FsdpAnalysis | None:
    """The FSDP2 analysis of one rank's timeline; None when it holds no FSDP all-gather."""
    annotation = tl.mask(Kind.USER_ANNOTATION)
    if not (annotation & tl.name_mask(lambda n: bool(_ALL_GATHER.match(n)))).any():
        return None
    thread = _main_thread(tl)
    if thread is None:
        return None
    main = (tl.pid == thread[0]) & (tl.tid == thread[1])
    notes: list[str] = []
    windows = step_windows(tl)
    if windows[0].size == 0:
        windows = (np.array([float(tl.ts.min())]), np.array([float(tl.end.max())]))
        notes.append("no ProfilerStep ranges: the whole trace is taken as one step")
    steps = int(windows[0].size)
    step_us = float(np.sum(windows[1] - windows[0])) / steps
    world = tl.meta.world_size or 0
    if not world:
        notes.append("the trace does not say the world size: unsharded bytes unknown")

    def ranges(pattern: re.Pattern[str]) -> list[int]:
        return _sorted(tl, annotation & main & tl.name_mask(lambda n: bool(pattern.match(n))))

    fsdp_idx = _sorted(tl, annotation & main & tl.name_mask(lambda n: n.startswith(_FSDP_PREFIX)))
    fsdp_spans = iv.union(*_ranges(tl, fsdp_idx))
    ops = tl.mask(Kind.CPU_OP) & main
    compute = iv.subtract(
        iv.union(
            *_ranges(tl, _sorted(tl, ops & tl.name_mask(lambda n: n.startswith(_COMPUTE_PREFIX))))
        ),
        fsdp_spans,
    )
    backward_from = _backward_starts(tl.ts[ranges(_PRE_BACKWARD)], windows)
    prefetch_s, prefetch_e = _ranges(tl, ranges(_PREFETCH))
    collectives, matched = _collectives(tl, main, ops, ranges, world)
    if not matched:
        notes.append(
            "no gloo:/nccl: runs of the collectives in the trace: each is timed by its issuing "
            "call alone, and what it leaves exposed is not seen"
        )
    inside = in_windows(windows, np.array([c.issue for c in collectives]))
    in_steps = [c for c, keep in zip(collectives, inside.tolist(), strict=True) if keep]
    for c in in_steps:
        w = int(np.searchsorted(windows[0], c.issue, side="right")) - 1
        c.backward = c.kind == "all_gather" and c.issue >= backward_from[w]
        c.prefetched = c.kind == "all_gather" and _inside(prefetch_s, prefetch_e, c.issue)
        span = iv.union(np.array([c.issue]), np.array([max(c.issue, c.run_end)]))
        c.exposed = iv.subtract(span, compute)
        run = iv.union(np.array([c.run_start]), np.array([c.run_end]))
        c.hidden_us = iv.overlap(run, compute)
    units = _units(in_steps, steps)
    ms = steps * _US_PER_MS

    def exposed(pred: Callable[[_Collective], bool]) -> float:
        chosen = [c for c in in_steps if pred(c)]
        if not chosen:
            return 0.0
        starts = np.concatenate([c.exposed[0] for c in chosen])
        ends = np.concatenate([c.exposed[1] for c in chosen])
        return iv.length(iv.union(starts, ends)) / ms

    gathers = [c for c in in_steps if c.kind == "all_gather"]
    return FsdpAnalysis(
        steps=steps,
        step_ms=step_us / _US_PER_MS,
        world_size=world or None,
        collective_events="gloo:/nccl: annotations" if matched else "c10d:: operators",
        units=units,
        all_gather_ms=sum(c.run_end - c.run_start for c in gathers) / ms,
        exposed_all_gather_ms=exposed(lambda c: c.kind == "all_gather"),
        exposed_forward_all_gather_ms=exposed(lambda c: c.kind == "all_gather" and not c.backward),
        exposed_backward_all_gather_ms=exposed(lambda c: c.kind == "all_gather" and c.backward),
        reduce_scatter_ms=sum(c.run_end - c.run_start for c in in_steps if c.kind == "reduce") / ms,
        exposed_reduce_scatter_ms=exposed(lambda c: c.kind == "reduce"),
        exposed_comm_ms=exposed(lambda c: True),
        compute_ms=iv.length(iv.intersect(compute, windows)) / ms,
        backward_all_gathers=sum(1 for c in gathers if c.backward) / steps,
        prefetched_all_gathers=(sum(c.prefetched for c in gathers) / len(gathers))
        if gathers
        else 0.0,
        unsharded_peak_bytes=_unsharded_peak(tl, gathers, ranges, windows),
        notes=notes,
    )


def _collectives(
    tl: Timeline, main: np.ndarray, ops: np.ndarray, ranges: _Ranges, world: int
) -> tuple[list[_Collective], bool]:
    """Each collective an FSDP issue range started, with its run matched (see the module)."""
    names = tl.names
    found: list[_Collective] = []
    any_run = False
    for kind, issue_words in _ISSUE_KINDS.items():
        issue_idx = _sorted(tl, ops & tl.name_mask(_issues(issue_words)))
        run_idx = _sorted(
            tl, tl.mask(Kind.USER_ANNOTATION) & ~main & tl.name_mask(_runs(_RUN_KINDS[kind]))
        )
        any_run = any_run or bool(run_idx)
        pattern = _ALL_GATHER if kind == "all_gather" else _REDUCE
        owners = ranges(pattern)
        own_s, own_e = _ranges(tl, owners)
        next_run = 0
        for i in issue_idx:
            t = float(tl.ts[i])
            run: int | None = None
            while next_run < len(run_idx) and tl.ts[run_idx[next_run]] < t:
                next_run += 1  # a run that started before this issue belongs to no issue
            if next_run < len(run_idx):
                run = run_idx[next_run]
                next_run += 1
            k = int(np.searchsorted(own_s, t, side="right")) - 1
            if k < 0 or own_e[k] < t:
                continue  # a collective FSDP did not issue (the script's own)
            match = pattern.match(names[tl.name_id[owners[k]]])
            if match is None:  # cannot happen: `owners` are the ranges the pattern matched
                continue
            code = int(tl.dtype[i])
            found.append(
                _Collective(
                    unit=_unit(match),
                    kind=kind,
                    issue=t,
                    run_start=float(tl.ts[run]) if run is not None else t,
                    run_end=float(tl.end[run]) if run is not None else float(tl.end[i]),
                    dtype=OP_DTYPES[code] if code >= 0 else None,
                    unsharded_bytes=unsharded_bytes(float(tl.nbytes[i]), world) if world else None,
                )
            )
    return sorted(found, key=lambda c: c.issue), any_run


def _units(collectives: list[_Collective], steps: int) -> list[FsdpUnit]:
    by_unit: dict[str, list[_Collective]] = defaultdict(list)
    for c in collectives:
        by_unit[c.unit].append(c)
    units = []
    ms = steps * _US_PER_MS
    for name, cs in by_unit.items():
        fwd = [c for c in cs if c.kind == "all_gather" and not c.backward]
        bwd = [c for c in cs if c.kind == "all_gather" and c.backward]
        red = [c for c in cs if c.kind == "reduce"]
        gathered = fwd + bwd

        def total(group: list[_Collective]) -> float:
            return sum(c.run_end - c.run_start for c in group) / ms

        units.append(
            FsdpUnit(
                name=name,
                unsharded_bytes=gathered[0].unsharded_bytes if gathered else None,
                param_dtype=gathered[0].dtype if gathered else None,
                reduce_dtype=red[0].dtype if red else None,
                reduce_bytes=red[0].unsharded_bytes if red else None,
                forward_all_gathers=len(fwd) / steps,
                backward_all_gathers=len(bwd) / steps,
                forward_prefetched=sum(c.prefetched for c in fwd) / len(fwd) if fwd else 0.0,
                backward_prefetched=sum(c.prefetched for c in bwd) / len(bwd) if bwd else 0.0,
                forward_all_gather_ms=total(fwd),
                forward_exposed_ms=sum(iv.length(c.exposed) for c in fwd) / ms,
                forward_hidden_ms=sum(c.hidden_us for c in fwd) / ms,
                backward_all_gather_ms=total(bwd),
                backward_exposed_ms=sum(iv.length(c.exposed) for c in bwd) / ms,
                backward_hidden_ms=sum(c.hidden_us for c in bwd) / ms,
                reduce_scatter_ms=total(red),
                reduce_scatter_exposed_ms=sum(iv.length(c.exposed) for c in red) / ms,
                reduce_scatter_hidden_ms=sum(c.hidden_us for c in red) / ms,
            )
        )
    # Forward order: the order of the units' first all-gather.
    first = {u.name: min(c.issue for c in by_unit[u.name]) for u in units}
    return sorted(units, key=lambda u: first[u.name])


def _unsharded_peak(
    tl: Timeline, gathers: list[_Collective], ranges: _Ranges, windows: iv.Intervals
) -> int | None:
    """The most unsharded bytes held at once (see the module): each all-gather holds its unit
    until the unit's next post_forward when the unit is gathered again before its
    post_backward_reshard, else until that reshard (else the end of its step)."""
    if not gathers or any(c.unsharded_bytes is None for c in gathers):
        return None
    names = tl.names

    def ends_by_unit(pattern: re.Pattern[str]) -> dict[str, np.ndarray]:
        out: dict[str, list[float]] = defaultdict(list)
        for i in ranges(pattern):
            match = pattern.match(names[tl.name_id[i]])
            if match is not None:  # always: `ranges` holds the ranges the pattern matched
                out[_unit(match)].append(float(tl.end[i]))
        return {k: np.sort(np.array(v)) for k, v in out.items()}

    post_forward, reshard = ends_by_unit(_POST_FORWARD), ends_by_unit(_RESHARD)
    by_unit: dict[str, list[float]] = defaultdict(list)
    for c in gathers:
        by_unit[c.unit].append(c.issue)
    events: list[tuple[float, int]] = []
    empty = np.empty(0)
    for c in gathers:
        w = int(np.searchsorted(windows[0], c.issue, side="right")) - 1
        step_end = float(windows[1][max(w, 0)])
        after = [t for t in reshard.get(c.unit, empty) if t > c.issue]
        release = after[0] if after else step_end
        regathered = [t for t in by_unit[c.unit] if c.issue < t < release]
        if regathered:
            freed = [t for t in post_forward.get(c.unit, empty) if c.issue < t < regathered[0]]
            release = freed[0] if freed else regathered[0]
        size = int(c.unsharded_bytes or 0)
        events += [(c.issue, size), (min(release, step_end), -size)]
    held = peak = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        held += delta
        peak = max(peak, held)
    return peak
