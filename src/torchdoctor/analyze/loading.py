"""Read a Kineto trace (`.json`, `.json.gz`, or a folder of per-rank traces) into a `Timeline`.

`decode.read_columns` reads the file (gzip by its magic bytes, whatever its name) in bounded
chunks and reduces its events to columns; this module turns those into a `Timeline` with its
`TraceMeta` (device, rank, skipped events) and reads folders of per-rank traces.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from torchdoctor.analyze.decode import Columns, read_columns
from torchdoctor.analyze.nested_costs import inherit_weight_grad_flops
from torchdoctor.analyze.timeline import Timeline, TraceMeta
from torchdoctor.core.errors import TraceError
from torchdoctor.core.log import get_logger

log = get_logger(__name__)

TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")


def _build(cols: Columns, meta: TraceMeta) -> Timeline:
    ts = cols.column("ts", np.float64)
    base = float(ts.min()) if ts.size else 0.0
    names = list(cols.names)
    kind = cols.column("kind", np.int8)
    name_id = cols.column("name_id", np.int32)
    pid, tid = cols.column("pid", np.int64), cols.column("tid", np.int64)
    dur = cols.column("dur", np.float64)
    flops = inherit_weight_grad_flops(
        names, kind, name_id, pid, tid, ts, dur, cols.column("flops", np.float64)
    )
    return Timeline(
        names=names,
        ts=ts - base,
        dur=dur,
        kind=kind,
        name_id=name_id,
        pid=pid,
        tid=tid,
        corr=cols.column("corr", np.int64),
        ext_id=cols.column("ext_id", np.int64),
        flops=flops,
        nbytes=cols.column("nbytes", np.float64),
        dtype=cols.column("dtype", np.int8),
        base_us=base,
        meta=meta,
    )


def _trace_meta(path: Path, top: dict[str, Any], cols: Columns) -> TraceMeta:
    props = top.get("deviceProperties")
    device_name = None
    if isinstance(props, list) and props and isinstance(props[0], dict):
        device_name = str(props[0].get("name")) if props[0].get("name") else None
    capability = None
    if isinstance(props, list) and props and isinstance(props[0], dict):
        p0 = props[0]
        major, minor = p0.get("computeMajor"), p0.get("computeMinor")
        # ROCm fills computeMajor/Minor with the gfx architecture (MI250: 9.0) and has a
        # 64-wide wavefront: NVIDIA's numbering only where the warp is 32 and no AMD name.
        nvidia = p0.get("warpSize") == 32 and "AMD" not in str(p0.get("name", "")).upper()
        if nvidia and isinstance(major, int) and isinstance(minor, int):
            capability = (major, minor)
    dist = top.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else {}
    rank = dist.get("rank")
    world = dist.get("world_size")
    warnings: list[str] = []
    if cols.skipped:
        warnings.append(
            f"{path.name}: skipped {cols.skipped} event(s) with a missing or negative "
            f"duration or timestamp, first {cols.first_skip}"
        )
        log.debug(warnings[-1])  # reported through TraceMeta.warnings (CLI: stderr)
    return TraceMeta(
        source=str(path),
        device_name=device_name,
        cuda_capability=capability,
        rank=rank if isinstance(rank, int) else None,
        world_size=world if isinstance(world, int) else None,
        backend=str(dist["backend"]) if isinstance(dist.get("backend"), str) else None,
        host_name=str(top["host_name"]) if isinstance(top.get("host_name"), str) else None,
        skipped_events=cols.skipped,
        warnings=tuple(warnings),
    )


def load_trace(path: str | Path) -> Timeline:
    """Load one trace file into a `Timeline`; raise `TraceError` on unreadable input."""
    p = Path(path)
    if not p.exists():
        raise TraceError(f"{p}: no such file or folder", hint="pass a .json or .json.gz trace")
    if p.is_dir():
        raise TraceError(
            f"{p}: is a folder", hint="use load_rank_traces() or analyze_trace() for a folder"
        )
    cols = read_columns(p)
    return _build(cols, _trace_meta(p, cols.top, cols))


def _is_trace_file(p: Path) -> bool:
    return p.is_file() and p.name.endswith((".json", ".json.gz", ".gz"))


def load_rank_traces(path: str | Path) -> list[Timeline]:
    """Load a folder of per-rank traces (or one file), sorted by rank then file name."""
    p = Path(path)
    if not p.exists():
        raise TraceError(f"{p}: no such file or folder", hint="pass a .json or .json.gz trace")
    if not p.is_dir():
        return [load_trace(p)]
    files = sorted(f for f in p.iterdir() if _is_trace_file(f))
    if not files:
        raise TraceError(
            f"{p}: folder holds no trace files (*.json, *.json.gz)",
            hint="pass the folder torch.profiler's tensorboard_trace_handler wrote to",
        )
    timelines = [load_trace(f) for f in files]
    return sorted(
        timelines,
        key=lambda t: (t.meta.rank if t.meta.rank is not None else 1 << 30, t.meta.source),
    )
