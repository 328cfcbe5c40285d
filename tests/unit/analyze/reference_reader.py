"""An exact, per-event reference for the trace reader: `json.load` and one event at a time.

Slow and whole-document (tests only): it states what the chunked reader must produce, event
by event, in plain Python, so the reader's batching, chunk cuts and re-decoding of unusual
pieces are checked against an independent reduction.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from torchdoctor.analyze.decode import _as_int
from torchdoctor.analyze.loading import _trace_meta
from torchdoctor.analyze.shapes import op_dtype_code, op_flops_and_bytes
from torchdoctor.analyze.timeline import CATEGORY_KINDS, Kind, Timeline


class _Columns:
    """Growing Python lists, one per Timeline column."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.rows: dict[str, list[Any]] = {
            f: [] for f in ("ts", "dur", "kind", "name_id", "pid", "tid", "corr", "ext_id",
                            "flops", "nbytes", "dtype")
        }  # fmt: skip
        self.skipped = 0
        self.first_skip: str | None = None


def _add_event(cols: _Columns, ev: Any) -> None:
    if not isinstance(ev, dict) or ev.get("ph") != "X":
        return
    cat = str(ev.get("cat", "")).lower()
    if cat == "trace":
        return
    ts, dur = ev.get("ts"), ev.get("dur")
    if (
        not isinstance(ts, int | float)
        or not isinstance(dur, int | float)
        or not math.isfinite(ts)
        or not math.isfinite(dur)
        or dur < 0
    ):
        cols.skipped += 1
        if cols.first_skip is None:
            cols.first_skip = f"{ev.get('name', '')!r} (ts={ts!r}, dur={dur!r})"
        return
    name = str(ev.get("name", ""))
    kind = CATEGORY_KINDS.get(cat, Kind.OTHER)
    args = ev.get("args")
    args = args if isinstance(args, dict) else {}
    flops = nbytes = math.nan
    dtype = -1
    if kind == Kind.CPU_OP:
        dtype = op_dtype_code(args.get("Input type"))
        recorded = args.get("flops")
        dims = args.get("Input Dims")
        if dims is None:  # torch 1.8 spelled it with a lower-case d
            dims = args.get("Input dims")
        if dims is not None:
            est_flops, est_bytes = op_flops_and_bytes(
                name, dims, args.get("Input type"), args.get("Concrete Inputs")
            )
            flops = est_flops if est_flops is not None else math.nan
            nbytes = est_bytes if est_bytes is not None else math.nan
        if isinstance(recorded, int | float) and recorded > 0:
            flops = float(recorded)
    elif kind == Kind.MEMCPY or kind == Kind.MEMSET:
        size = args.get("bytes", args.get("size"))
        nbytes = float(_as_int(size, -1)) if size is not None else math.nan
    row = cols.rows
    row["ts"].append(float(ts))
    row["dur"].append(float(dur))
    row["kind"].append(int(kind))
    row["name_id"].append(cols.names.setdefault(name, len(cols.names)))
    row["pid"].append(_as_int(ev.get("pid"), 0))
    row["tid"].append(_as_int(ev.get("tid"), 0))
    row["corr"].append(_as_int(args.get("correlation")))
    row["ext_id"].append(_as_int(args.get("External id", args.get("external id"))))
    row["flops"].append(flops)
    row["nbytes"].append(nbytes)
    row["dtype"].append(dtype)


DTYPES = {"ts": np.float64, "dur": np.float64, "kind": np.int8, "name_id": np.int32,
          "pid": np.int64, "tid": np.int64, "corr": np.int64, "ext_id": np.int64,
          "flops": np.float64, "nbytes": np.float64, "dtype": np.int8}  # fmt: skip


def reference_load(path: Path) -> Timeline:
    """The trace at `path` read whole with `json.load`, reduced one event at a time."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    top = doc if isinstance(doc, dict) else {}
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    cols = _Columns()
    for ev in events if isinstance(events, list) else []:
        _add_event(cols, ev)
    columns = {f: np.asarray(v, dtype=DTYPES[f]) for f, v in cols.rows.items()}
    base = float(columns["ts"].min()) if columns["ts"].size else 0.0
    columns["ts"] = columns["ts"] - base
    return Timeline(
        names=list(cols.names),
        base_us=base,
        meta=_trace_meta(path, top, cols),  # type: ignore[arg-type]
        **columns,
    )
