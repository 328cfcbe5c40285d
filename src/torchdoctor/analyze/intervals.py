"""Interval arithmetic on numpy arrays: unions, total length, overlap, subtraction.

A set of intervals is a pair (starts, ends) of float64 arrays. `union` returns the disjoint,
sorted form; the other functions expect that form. Everything is vectorised so a million
kernels cost milliseconds.
"""

from __future__ import annotations

import numpy as np

from torchdoctor.analyze.timeline import FloatArray

Intervals = tuple[FloatArray, FloatArray]


def empty() -> Intervals:
    return np.empty(0, dtype=np.float64), np.empty(0, dtype=np.float64)


def union(starts: FloatArray, ends: FloatArray) -> Intervals:
    """Merge possibly overlapping intervals into disjoint sorted ones."""
    if starts.size == 0:
        return empty()
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    # A new merged interval begins where a start lies beyond everything reached so far.
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], reach[last]


def length(iv: Intervals) -> float:
    return float(np.sum(iv[1] - iv[0]))


def _covered_up_to(iv: Intervals, x: FloatArray) -> FloatArray:
    """Length of the disjoint set `iv` lying left of each point in `x`."""
    s, e = iv
    if s.size == 0:
        return np.zeros_like(x)
    cum = np.concatenate(([0.0], np.cumsum(e - s)))
    idx = np.searchsorted(s, x, side="right") - 1
    safe = np.clip(idx, 0, None)
    partial = np.clip(np.minimum(x, e[safe]) - s[safe], 0.0, None)
    return np.where(idx >= 0, cum[safe] + partial, 0.0)


def overlap_each(iv: Intervals, starts: FloatArray, ends: FloatArray) -> FloatArray:
    """For each query interval, how much of it the disjoint set `iv` covers."""
    return _covered_up_to(iv, ends) - _covered_up_to(iv, starts)


def overlap(a: Intervals, b: Intervals) -> float:
    """Length of the intersection of two disjoint sets."""
    return float(np.sum(overlap_each(b, a[0], a[1])))


def clip(iv: Intervals, lo: float, hi: float) -> Intervals:
    s, e = np.clip(iv[0], lo, hi), np.clip(iv[1], lo, hi)
    keep = e > s
    return s[keep], e[keep]


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """a minus b, both disjoint sorted; result disjoint sorted."""
    if a[0].size == 0 or b[0].size == 0:
        return a
    # Points of a's complement: gaps of b inside a. Build b's complement then intersect.
    inf = np.inf
    gaps_s = np.concatenate(([-inf], b[1]))
    gaps_e = np.concatenate((b[0], [inf]))
    return intersect(a, (gaps_s, gaps_e))


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two disjoint sorted sets."""
    if a[0].size == 0 or b[0].size == 0:
        return empty()
    # Every intersection piece starts at a start of a or of b; find candidates per a-interval.
    pieces_s: list[FloatArray] = []
    pieces_e: list[FloatArray] = []
    lo = np.searchsorted(b[1], a[0], side="right")
    hi = np.searchsorted(b[0], a[1], side="left")
    counts = np.clip(hi - lo, 0, None)
    if counts.sum() == 0:
        return empty()
    a_idx = np.repeat(np.arange(a[0].size), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    b_idx = np.repeat(lo, counts) + offsets
    s = np.maximum(a[0][a_idx], b[0][b_idx])
    e = np.minimum(a[1][a_idx], b[1][b_idx])
    keep = e > s
    pieces_s.append(s[keep])
    pieces_e.append(e[keep])
    return np.concatenate(pieces_s), np.concatenate(pieces_e)
