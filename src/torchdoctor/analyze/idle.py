"""Device idle gaps and what each was waiting for.

A gap is a stretch of the device window with nothing running on any stream. It is
attributed by the activity that ends it, through that activity's launch call (correlation id):

- host wait: the launch call started after the gap began. The device had run out of work;
  the host (Python, data loading, a sync) was late. Cure: feed the device sooner.
- between kernels: the work was already launched when the gap began, so the device waited on
  launch latency, an event/stream dependency or a copy engine. Cure: fewer, larger kernels.
- unattributed: no launch record (e.g. a trace without correlation ids).
"""

from __future__ import annotations

import numpy as np

from torchdoctor.analyze import intervals as iv
from torchdoctor.analyze.launches import match_launches
from torchdoctor.analyze.records import IdleStats
from torchdoctor.analyze.timeline import BoolArray, Kind, Timeline


def idle_stats(tl: Timeline, selected: BoolArray) -> IdleStats | None:
    dev = np.flatnonzero(selected)
    if dev.size == 0:
        return None
    busy_s, busy_e = iv.union(tl.ts[dev], tl.end[dev])
    gap_s, gap_e = busy_e[:-1], busy_s[1:]
    gaps = gap_e - gap_s
    # The activity ending each gap: the earliest-starting selected event at the gap's end.
    order = dev[np.argsort(tl.ts[dev], kind="stable")]
    first = order[np.searchsorted(tl.ts[order], gap_e, side="left").clip(0, order.size - 1)]
    launched = np.full(first.size, np.nan)
    k_idx, l_idx = match_launches(tl, first)
    if k_idx.size:
        start_of = dict(zip(k_idx.tolist(), tl.ts[l_idx].tolist(), strict=True))
        launched = np.array([start_of.get(int(i), np.nan) for i in first.tolist()])
    # Copies and fills are launched by cudaMemcpyAsync/Memset calls, not "launch" calls.
    other = np.isnan(launched) & ~tl.mask(Kind.KERNEL)[first]
    if other.any():
        rt = np.flatnonzero(tl.mask(Kind.RUNTIME) & (tl.corr >= 0))
        by_corr = dict(zip(tl.corr[rt].tolist(), tl.ts[rt].tolist(), strict=True))
        for j in np.flatnonzero(other).tolist():
            launched[j] = by_corr.get(int(tl.corr[first[j]]), np.nan)
    known = ~np.isnan(launched)
    host = known & (launched > gap_s)
    return IdleStats(
        gaps=int(gaps.size),
        idle_us=float(gaps.sum()),
        host_wait_us=float(gaps[host].sum()),
        between_kernels_us=float(gaps[known & ~host].sum()),
        unattributed_us=float(gaps[~known].sum()),
    )
