"""Fake distributed jobs: per-rank Kineto traces of a DDP loop on one shared clock.

Each step every rank waits `data_ms` for its batch, runs forward and backward (`compute_ms`
split 1:2), and reaches the gradient all-reduce; the all-reduce ends on every rank `XFER_MS`
after the last rank reached it, then each rank steps its optimizer. So a rank that is slower
in data or compute makes the others wait in `gloo:all_reduce`, as on a real gloo job.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

XFER_MS = 1.0
OPT_MS = 0.5


def _event(name: str, cat: str, ts_ms: float, dur_ms: float, tid: int) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": 1_000_000.0 + ts_ms * 1000.0,
        "dur": dur_ms * 1000.0,
        "args": {},
    }


def job_events(
    data_ms: Sequence[Sequence[float]],
    compute_ms: Sequence[Sequence[float]],
    first_step: Sequence[int] | None = None,
) -> list[list[dict[str, Any]]]:
    """Per rank, the events of the steps: `data_ms[k][r]`, `compute_ms[k][r]` per step k;
    rank r numbers its first step `first_step[r]` (5 by default)."""
    ranks = len(data_ms[0])
    events: list[list[dict[str, Any]]] = [[] for _ in range(ranks)]
    t = 0.0
    for k, (datas, computes) in enumerate(zip(data_ms, compute_ms, strict=True)):
        arrive = [t + d + c for d, c in zip(datas, computes, strict=True)]
        done = max(arrive) + XFER_MS
        end = done + OPT_MS
        for r in range(ranks):
            ev = events[r]
            number = k + (first_step[r] if first_step else 5)
            ev.append(_event(f"ProfilerStep#{number}", "user_annotation", t, end - t, 1))
            loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
            ev.append(_event(loader, "user_annotation", t, datas[r], 1))
            fwd = computes[r] / 3
            ev.append(_event("aten::linear", "cpu_op", t + datas[r], fwd, 1))
            name = "autograd::engine::evaluate_function: AddmmBackward0"
            ev.append(_event(name, "cpu_op", t + datas[r] + fwd, 2 * fwd, 1))
            ev.append(_event("c10d::allreduce_", "cpu_op", arrive[r], 0.05, 1))
            ev.append(_event("gloo:all_reduce", "user_annotation", arrive[r], done - arrive[r], 2))
            ev.append(_event("Optimizer.step#SGD.step", "user_annotation", done, OPT_MS, 1))
        t = end
    return events


def write_job(
    folder: Path,
    data_ms: Sequence[Sequence[float]],
    compute_ms: Sequence[Sequence[float]],
    *,
    hosts: Sequence[str] | None = None,
    first_step: Sequence[int] | None = None,
) -> Path:
    """Write one gzipped trace per rank into `folder` (same host unless `hosts` differ)."""
    folder.mkdir(parents=True, exist_ok=True)
    per_rank = job_events(data_ms, compute_ms, first_step)
    for r, events in enumerate(per_rank):
        doc = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "gloo", "rank": r, "world_size": len(per_rank)},
            "host_name": hosts[r] if hosts else "host",
            "traceEvents": events,
        }
        with gzip.open(folder / f"trace.rank{r}.json.gz", "wt") as f:
            json.dump(doc, f)
    return folder
