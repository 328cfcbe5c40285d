"""Read a Kineto trace (`.json`, `.json.gz`, or a folder of per-rank traces) into a `Timeline`.

Two readers, one result. `fastload.fast_columns` (msgspec, bounded chunks, batched per-event
work) takes every well-formed Kineto trace; when it declines (a bare event array, malformed
JSON, odd event shapes) the exact streaming reader below runs instead and also produces the
precise error message for bad input. Tests check both give identical timelines.

The streaming reader: the file (gunzipped on the fly when it starts with the gzip magic
bytes, whatever its name) is fed through ijson's C (yajl2) parser, which yields one event
object at a time; each is reduced to a few numbers and dropped.

The top-level metadata we use (`deviceProperties`, `distributedInfo`) may come before or
after `traceEvents` depending on the torch version; rather than a second pass, the reader
keeps the first and last few megabytes of the stream and parses the metadata from those.
"""

from __future__ import annotations

import gzip
import io
import math
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from torchdoctor.analyze.fastload import FastColumns, _as_int, fast_columns
from torchdoctor.analyze.shapes import op_dtype_code, op_flops_and_bytes
from torchdoctor.analyze.timeline import CATEGORY_KINDS, Kind, Timeline, TraceMeta
from torchdoctor.core.errors import TraceError
from torchdoctor.core.log import get_logger

log = get_logger(__name__)

GZIP_MAGIC = b"\x1f\x8b"
READ_CHUNK = 1 << 20
# Metadata objects are small (tens of kB even with a full `collect_env` dump); keeping 4 MB
# of each end of the stream covers them with a wide margin.
EDGE_BYTES = 4 << 20
TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")


class _EdgeKeepingReader:
    """A file wrapper that remembers the first and last EDGE_BYTES of what was read."""

    def __init__(self, raw: io.BufferedIOBase) -> None:
        self._raw = raw
        self.head = bytearray()
        self.tail = bytearray()

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # ijson probes with read(0) to tell bytes from text
            return b""
        data = self._raw.read(size if size > 0 else READ_CHUNK)
        if len(self.head) < EDGE_BYTES:
            self.head += data[: EDGE_BYTES - len(self.head)]
        self.tail += data
        if len(self.tail) > 2 * EDGE_BYTES:
            del self.tail[: len(self.tail) - EDGE_BYTES]
        return data


def _open_stream(path: Path) -> io.BufferedIOBase:
    fh = path.open("rb")
    magic = fh.read(2)
    fh.seek(0)
    if magic == GZIP_MAGIC:  # gzip.open owns its file: closing the stream closes it
        fh.close()
        return gzip.open(path, "rb")
    if path.name.endswith(".gz"):
        fh.close()
        raise TraceError(
            f"{path}: not a gzip file although named .gz",
            hint="re-export the trace, or rename it to .json if it is plain JSON",
        )
    return fh


def _top_level_items(data: bytes) -> dict[str, Any]:
    """Complete top-level key/values of a JSON object prefix, stopping at the first gap."""
    import ijson  # the streaming reader's parser; the fast path never needs it

    found: dict[str, Any] = {}
    try:
        for key, value in ijson.kvitems(io.BytesIO(data), "", use_float=True):
            if key != "traceEvents":
                found[key] = value
    except (ijson.JSONError, ValueError):
        pass
    return found


def _metadata(reader: _EdgeKeepingReader) -> dict[str, Any]:
    meta = _top_level_items(bytes(reader.head))
    tail = bytes(reader.tail)
    for key in (b'"deviceProperties"', b'"distributedInfo"'):
        if key.decode().strip('"') in meta:
            continue
        at = tail.rfind(key)
        if at >= 0:  # the keys after traceEvents form an object once given its opening brace
            meta.update(_top_level_items(b"{" + tail[at:]))
    return meta


class _Columns:
    """Growing Python lists, one per Timeline column; turned into numpy arrays at the end."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.ts: list[float] = []
        self.dur: list[float] = []
        self.kind: list[int] = []
        self.name_id: list[int] = []
        self.pid: list[int] = []
        self.tid: list[int] = []
        self.corr: list[int] = []
        self.ext_id: list[int] = []
        self.flops: list[float] = []
        self.nbytes: list[float] = []
        self.dtype: list[int] = []
        self.skipped = 0
        self.first_skip: str | None = None


def _add_event(cols: _Columns, ev: Any) -> None:
    if not isinstance(ev, dict) or ev.get("ph") != "X":
        return  # metadata (M), flows (s/f), instants (i), counters: not intervals
    cat = str(ev.get("cat", "")).lower()
    if cat == "trace":
        return  # the profiler's own whole-window span
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
            cols.first_skip = f"{ev.get('name', '?')!r} (ts={ts!r}, dur={dur!r})"
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
    name_id = cols.names.setdefault(name, len(cols.names))
    cols.ts.append(float(ts))
    cols.dur.append(float(dur))
    cols.kind.append(int(kind))
    cols.name_id.append(name_id)
    cols.pid.append(_as_int(ev.get("pid"), 0))
    cols.tid.append(_as_int(ev.get("tid"), 0))
    cols.corr.append(_as_int(args.get("correlation")))
    cols.ext_id.append(_as_int(args.get("External id", args.get("external id"))))
    cols.flops.append(flops)
    cols.nbytes.append(nbytes)
    cols.dtype.append(dtype)


def _build(cols: _Columns, meta: TraceMeta) -> Timeline:
    ts = np.asarray(cols.ts, dtype=np.float64)
    base = float(ts.min()) if ts.size else 0.0
    return Timeline(
        names=list(cols.names),
        ts=ts - base,
        dur=np.asarray(cols.dur, dtype=np.float64),
        kind=np.asarray(cols.kind, dtype=np.int8),
        name_id=np.asarray(cols.name_id, dtype=np.int32),
        pid=np.asarray(cols.pid, dtype=np.int64),
        tid=np.asarray(cols.tid, dtype=np.int64),
        corr=np.asarray(cols.corr, dtype=np.int64),
        ext_id=np.asarray(cols.ext_id, dtype=np.int64),
        flops=np.asarray(cols.flops, dtype=np.float64),
        nbytes=np.asarray(cols.nbytes, dtype=np.float64),
        dtype=np.asarray(cols.dtype, dtype=np.int8),
        base_us=base,
        meta=meta,
    )


def _build_fast(cols: FastColumns, meta: TraceMeta) -> Timeline:
    ts = cols.column("ts", np.float64)
    base = float(ts.min()) if ts.size else 0.0
    return Timeline(
        names=list(cols.names),
        ts=ts - base,
        dur=cols.column("dur", np.float64),
        kind=cols.column("kind", np.int8),
        name_id=cols.column("name_id", np.int32),
        pid=cols.column("pid", np.int64),
        tid=cols.column("tid", np.int64),
        corr=cols.column("corr", np.int64),
        ext_id=cols.column("ext_id", np.int64),
        flops=cols.column("flops", np.float64),
        nbytes=cols.column("nbytes", np.float64),
        dtype=cols.column("dtype", np.int8),
        base_us=base,
        meta=meta,
    )


def _trace_meta(path: Path, top: dict[str, Any], cols: _Columns | FastColumns) -> TraceMeta:
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
        skipped_events=cols.skipped,
        warnings=tuple(warnings),
    )


def _stream_events(path: Path, cols: _Columns, prefix: str) -> _EdgeKeepingReader:
    import ijson

    stream = _open_stream(path)
    reader = _EdgeKeepingReader(stream)
    try:
        for ev in ijson.items(reader, prefix, use_float=True):
            _add_event(cols, ev)
    except (EOFError, zlib.error) as exc:
        raise TraceError(
            f"{path}: the gzip stream is truncated or corrupt ({exc})",
            hint="the profiler may have been killed while writing; re-record the trace",
        ) from None
    except gzip.BadGzipFile as exc:
        raise TraceError(f"{path}: not a valid gzip file ({exc})") from None
    except ijson.IncompleteJSONError as exc:
        raise TraceError(
            f"{path}: not valid JSON or truncated ({str(exc).splitlines()[0][:120]})",
            hint="pass a Chrome/Kineto trace written by torch.profiler",
        ) from None
    except (ijson.JSONError, UnicodeDecodeError, ValueError) as exc:
        raise TraceError(f"{path}: not valid JSON ({str(exc).splitlines()[0][:120]})") from None
    finally:
        stream.close()
    return reader


def _has_top_level_key(path: Path, key: str) -> str | None:
    """'object' + key present, 'array' for a bare Chrome-trace array, else None."""
    import ijson

    stream = _open_stream(path)
    try:
        for prefix, event, value in ijson.parse(stream):
            if prefix == "" and event == "start_array":
                return "array"
            if prefix == "" and event == "map_key" and value == key:
                return "object"
    except (ijson.JSONError, EOFError, zlib.error, OSError):
        return None
    finally:
        stream.close()
    return None


def load_trace(path: str | Path) -> Timeline:
    """Load one trace file into a `Timeline`; raise `TraceError` on unreadable input."""
    p = Path(path)
    if not p.exists():
        raise TraceError(f"{p}: no such file or folder", hint="pass a .json or .json.gz trace")
    if p.is_dir():
        raise TraceError(
            f"{p}: is a folder", hint="use load_rank_traces() or analyze_trace() for a folder"
        )
    fast = fast_columns(p)
    if fast is not None and (len(fast.names) or fast.skipped):
        return _build_fast(fast, _trace_meta(p, fast.top, fast))
    # The exact streaming reader: unusual layouts, and the precise error for bad input.
    cols = _Columns()
    reader = _stream_events(p, cols, "traceEvents.item")
    if not cols.ts and not cols.skipped:
        shape = _has_top_level_key(p, "traceEvents")
        if shape == "array":  # the Chrome trace "JSON array" format: a bare list of events
            reader = _stream_events(p, cols, "item")
        elif shape is None:
            raise TraceError(
                f"{p}: JSON has no 'traceEvents' list",
                hint="pass a Chrome/Kineto trace written by torch.profiler",
            )
    top = _metadata(reader)
    return _build(cols, _trace_meta(p, top, cols))


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
