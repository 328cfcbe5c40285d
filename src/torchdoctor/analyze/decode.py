"""The one trace reader: msgspec decodes bounded chunks of events into slim structs.

Why msgspec: a streaming parser that builds a Python dict per event and then walks it in
Python cost ~3 s of CPU on the 26 MB (109k-event) A100 reference trace. msgspec decodes JSON
straight into `Struct`s holding only the fields the analyses read (unknown keys are skipped
in C) and hands the shape fields over as raw JSON bytes, so the per-event Python work is a
few list comprehensions plus numpy. Measured on this project's 2-core machine: msgspec 0.5 s
vs orjson 1.4 s for the whole A100 document (both under load); see benchmarks/RESULTS.md.

Bounded memory: the decompressed stream (gzip by its magic bytes, whatever the file's name)
is read in CHUNK_BYTES pieces; events are cut at an element boundary of the events array and
each piece is decoded on its own, so peak memory is a few chunks plus the numpy columns,
whatever the trace size. A cut is found by trying the last few `}` followed by `,`: a cut
inside a nested value or a string leaves an unbalanced piece, which fails to decode. Where
those few fail (an event holding `},` in its strings, or one larger than a chunk), a scan of
the JSON's structure (`_Boundaries`) takes over, over the bytes it has not seen yet only, so
the cost stays linear in the trace's size whatever its events hold.

Bounded input (`ReadLimits`): a trace comes from anywhere, and a 16 kB gzip can hold 16 MB of
one event. The decompressed bytes, one event's bytes and an event name's length have caps;
past one, the read stops with one line naming the cap and the variable that raises it.

Both Chrome trace layouts are read: an object with a `traceEvents` array (Kineto), and a
bare array of events. A piece whose events do not fit the typed structs (an event that is
not an object, no or an unknown "ph", non-object `args`, a list as a name) is decoded again
as plain JSON and each event is reduced to the same struct (`_to_event`), so every event
goes through the one reducer, `Columns.add`. Bad input raises `TraceError` with one line.
"""

from __future__ import annotations

import gc
import gzip
import math
import re
import zlib
from pathlib import Path
from typing import Any, Final, Union

import msgspec
import numpy as np

from torchdoctor.analyze._bounds import (
    MAX_EVENT_BYTES,
    MAX_NAME_CHARS,
    MAX_TRACE_BYTES,
    ReadLimits,
    _Boundaries,
    _Capped,
    _OverCap,
)
from torchdoctor.analyze.shapes import op_dtype_code, op_flops_and_bytes
from torchdoctor.analyze.timeline import CATEGORY_KINDS, Kind
from torchdoctor.core.errors import TraceError

__all__ = [
    "CHUNK_BYTES",
    "MAX_EVENT_BYTES",
    "MAX_NAME_CHARS",
    "MAX_TRACE_BYTES",
    "Columns",
    "ReadLimits",
    "read_columns",
]

# 1 MB of decompressed JSON per decode. Measured on the 26 MB A100 trace (analyze_trace CPU
# time, peak RSS): 16 MB chunks 0.57 s / 155 MB, 4 MB 0.44 s / 94 MB, 1 MB 0.43 s / 65 MB;
# small chunks stay in cache and per-chunk overhead (~0.1 ms) is noise.
CHUNK_BYTES = 1 << 20
# The `traceEvents` key must appear within this many bytes (metadata comes first; a full
# deviceProperties + collect_env dump is tens of kB); reading further for it would hold an
# unbounded head in memory.
HEAD_LIMIT_BYTES = 64 << 20
# How many `}` candidates to try by decoding before the structure scan takes over. A try that
# fails costs a decode of the buffer up to it; on real traces the last candidate is an event's
# end (the first try succeeds), so a few tries cover them and a crafted buffer costs at most
# this many decodes of one chunk.
MAX_CUT_TRIES = 4
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
GZIP_MAGIC = b"\x1f\x8b"
_NULL = msgspec.Raw(b"null")
# "External id" absent (not null): take the lower-case spelling older traces use.
_ABSENT = -(1 << 62)


# Event names, categories and recorded FLOPs are dictionary keys in the reducer: a JSON scalar
# only, so that a list or an object there fails validation (and takes `_to_event`) instead of
# failing to hash.
_Scalar = str | int | float | bool | None


# gc=False: these structs hold only decoded JSON values, so they can never be part of a
# reference cycle; untracked, they cost the garbage collector nothing.
class _Args(msgspec.Struct, frozen=True, gc=False):
    correlation: Any = -1
    external_id: Any = msgspec.field(name="External id", default=_ABSENT)
    external_id_lc: Any = msgspec.field(name="external id", default=-1)
    flops: _Scalar = None
    dims: msgspec.Raw = msgspec.field(name="Input Dims", default=_NULL)
    # torch 1.8's spelling (lower-case d); read where "Input Dims" is absent.
    dims_lc: msgspec.Raw = msgspec.field(name="Input dims", default=_NULL)
    types: msgspec.Raw = msgspec.field(name="Input type", default=_NULL)
    concrete: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=_NULL)
    nbytes: Any = msgspec.field(name="bytes", default=None)
    size: Any = None


_NO_ARGS = _Args()


def _dims(args: _Args) -> msgspec.Raw:
    """The recorded input shapes under either spelling of the key."""
    return args.dims if bytes(args.dims) != b"null" else args.dims_lc


class _Event(msgspec.Struct, frozen=True, gc=False, tag_field="ph", tag="X"):
    """A complete ("ph": "X") event: the only kind the analyses read."""

    cat: _Scalar = ""
    name: _Scalar = ""
    pid: Any = 0
    tid: Any = 0
    ts: Any = None
    dur: Any = None
    args: _Args = _NO_ARGS


# Every other phase of the Chrome trace event format decodes into an empty struct: msgspec
# picks the type by "ph" and skips the rest in C, without building names or args for the
# ~40% of a Kineto trace that is flow and metadata events (~15% of the decode time on the
# A100 trace). An event with no "ph", or one not listed, fails validation: its piece is
# decoded again as plain JSON (`_lenient`).
_OTHER_PHASES = (
    "B", "E", "i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "s", "t", "f", "P", "N", "O",
    "D", "M", "V", "v", "R", "c", "(", ")",
)  # fmt: skip
_PHASE_TYPES: tuple[Any, ...] = tuple(
    msgspec.defstruct(f"_Phase{i}", [], tag_field="ph", tag=ph, frozen=True, gc=False)
    for i, ph in enumerate(_OTHER_PHASES)
)
_AnyEvent = Union[(_Event, *_PHASE_TYPES)]  # type: ignore[valid-type]


class _Doc(msgspec.Struct):
    traceEvents: list[_AnyEvent] = []  # the JSON keys
    deviceProperties: Any = None
    distributedInfo: Any = None
    host_name: Any = None


_DOC = msgspec.json.Decoder(_Doc)
_EVENTS = msgspec.json.Decoder(list[_AnyEvent])


class _Interner(dict[Any, int]):
    """Raw event name -> index into `names` (interned as str(name): 1 and "1" are one name)."""

    def __init__(self, names: dict[str, int], max_chars: int = MAX_NAME_CHARS) -> None:
        super().__init__()
        self.names = names
        self.max_chars = max_chars

    def __missing__(self, key: Any) -> int:
        name = str(key)
        if len(name) > self.max_chars:
            raise _OverCap("name_chars", "has an event name longer than", self.max_chars)
        value = self.names.setdefault(name, len(self.names))
        self[key] = value
        return value


class _CategoryKinds(dict[Any, int]):
    """Raw `cat` -> Kind code; -1 for the profiler's own "Trace" span (dropped)."""

    def __missing__(self, key: Any) -> int:
        cat = str(key).lower()
        value = -1 if cat == "trace" else int(CATEGORY_KINDS.get(cat, Kind.OTHER))
        self[key] = value
        return value


#: The range of the int64 columns ids and pids are kept in.
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _as_int(value: Any, default: int = -1) -> int:
    if isinstance(value, int):
        # An id past int64 (a crafted pid of 10**30) is no id the profiler writes.
        return value if _INT64_MIN <= value <= _INT64_MAX else default
    if isinstance(value, float) and math.isfinite(value) and abs(value) < 2.0**63:
        return int(value)
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return hash(value) & 0x7FFFFFFF  # string pids/tids ("stream 7") stay distinct
    return default


# Python types numpy converts to numbers exactly as `_as_int` / float() would; a column of
# only these takes one typed np.array call (about 3x cheaper than letting numpy infer the
# dtype first). Strings, None and anything else take the exact per-value path.
_NUMBER_TYPES = frozenset({int, float, bool})


def _int_column(values: list[Any], default: int) -> np.ndarray:
    if set(map(type, values)) <= _NUMBER_TYPES:
        try:  # floats truncate toward zero, as int() does
            return np.array(values, dtype=np.int64)
        except (ValueError, OverflowError):
            pass  # NaN or infinity: `_as_int` gives those the default
    return np.asarray([_as_int(v, default) for v in values], dtype=np.int64)


def _float_column(values: list[Any]) -> np.ndarray | None:
    """float64 column, or None when a value is not a number or an integer past float's range
    (the caller checks each)."""
    if set(map(type, values)) <= _NUMBER_TYPES:
        try:
            return np.array(values, dtype=np.float64)
        except OverflowError:
            return None
    return None


def _numeric(value: Any) -> bool:
    if not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer past float's range (a crafted 10**400)
        return False


class _Memo(dict[tuple[Any, ...], int]):
    """Key -> index of its value in `computed`, worked out on first sight (hits stay in C).

    Indices rather than the values themselves: a chunk's lookups then become one integer
    array that gathers from the small table of distinct values.
    """

    def __init__(self, compute: Any) -> None:
        super().__init__()
        self.compute = compute
        self.computed: list[tuple[float, float, int]] = []

    def __missing__(self, key: tuple[Any, ...]) -> int:
        self.computed.append(self.compute(key))
        index = len(self.computed) - 1
        self[key] = index
        return index


class Columns:
    """Per-chunk numpy columns, concatenated at the end; the same fields as `Timeline`."""

    FIELDS = (
        "ts", "dur", "kind", "name_id", "pid", "tid", "corr", "ext_id", "flops", "nbytes", "dtype"
    )  # fmt: skip

    def __init__(self, limits: ReadLimits | None = None) -> None:
        self.limits = limits or ReadLimits()
        self.names: dict[str, int] = {}
        self.parts: dict[str, list[np.ndarray]] = {f: [] for f in self.FIELDS}
        self.skipped = 0
        self.first_skip: str | None = None
        self.top: dict[str, Any] = {}
        self._interner = _Interner(self.names, self.limits.name_chars)
        self._kinds = _CategoryKinds()
        # (name, recorded flops, dims, types, concrete) -> (flops, bytes, dtype code): real
        # traces repeat the same op on the same shapes every step, so each is computed once.
        self._estimates = _Memo(self._estimate)

    def column(self, field: str, dtype: Any) -> np.ndarray:
        parts = self.parts[field]
        return np.concatenate(parts).astype(dtype) if parts else np.empty(0, dtype=dtype)

    def _estimate(self, key: tuple[Any, ...]) -> tuple[float, float, int]:
        """FLOPs, bytes and dtype code of a cpu_op from (name, recorded flops, dims, types,
        concrete)."""
        raw_name, recorded, dims_raw, types_raw, concrete_raw = key
        dims = msgspec.json.decode(dims_raw)
        types = msgspec.json.decode(types_raw)
        flops = nbytes = math.nan
        if dims is not None:
            try:
                est_flops, est_bytes = op_flops_and_bytes(
                    str(raw_name), dims, types, msgspec.json.decode(concrete_raw)
                )
            except OverflowError:  # shapes past float's range (a crafted 10**400): no estimate
                est_flops = est_bytes = None
            flops = est_flops if est_flops is not None else math.nan
            nbytes = est_bytes if est_bytes is not None else math.nan
        if _numeric(recorded) and recorded > 0:
            flops = float(recorded)
        return flops, nbytes, op_dtype_code(types)

    def add(self, events: list[Any]) -> None:
        """Reduce one decoded chunk of events to columns (every event of the trace comes here)."""
        xs = [e for e in events if type(e) is _Event]
        kinds_map = self._kinds
        kind = np.asarray([kinds_map[e.cat] for e in xs], dtype=np.int8)
        ts_col = _float_column([e.ts for e in xs])
        dur_col = _float_column([e.dur for e in xs])
        keep = kind >= 0
        if ts_col is not None and dur_col is not None:
            ts, dur = ts_col, dur_col
            valid = np.isfinite(ts) & np.isfinite(dur) & (dur >= 0)
        else:  # a null or a string somewhere: check each event exactly
            valid = np.asarray(
                [_numeric(e.ts) and _numeric(e.dur) and e.dur >= 0 for e in xs], dtype=bool
            )
            ts = np.asarray([e.ts if v else 0.0 for e, v in zip(xs, valid, strict=True)], float)
            dur = np.asarray([e.dur if v else 0.0 for e, v in zip(xs, valid, strict=True)], float)
        bad = keep & ~valid
        if bad.any():
            self.skipped += int(bad.sum())
            if self.first_skip is None:
                e = xs[int(np.flatnonzero(bad)[0])]
                self.first_skip = f"{e.name!r} (ts={e.ts!r}, dur={e.dur!r})"
        keep &= valid
        if not keep.all():
            xs = [e for e, k in zip(xs, keep.tolist(), strict=True) if k]
            kind, ts, dur = kind[keep], ts[keep], dur[keep]
        interner = self._interner
        args = [e.args for e in xs]
        ext = _int_column([a.external_id for a in args], -1)
        absent = ext == _ABSENT
        if absent.any():
            ext[absent] = _int_column([a.external_id_lc for a in args], -1)[absent]
        flops = np.full(len(xs), math.nan)
        nbytes = np.full(len(xs), math.nan)
        dtype = np.full(len(xs), -1, dtype=np.int8)
        cpu = np.flatnonzero(kind == int(Kind.CPU_OP))
        if cpu.size:
            memo = self._estimates
            ids = [
                memo[(e.name, e.args.flops, bytes(_dims(e.args)), bytes(e.args.types),
                      bytes(e.args.concrete))]
                for e in map(xs.__getitem__, cpu.tolist())
            ]  # fmt: skip
            table = np.asarray(memo.computed, dtype=np.float64)
            flops[cpu], nbytes[cpu], dtype[cpu] = table[np.asarray(ids, dtype=np.intp)].T
        for i in np.flatnonzero((kind == int(Kind.MEMCPY)) | (kind == int(Kind.MEMSET))).tolist():
            a = args[i]
            size = a.nbytes if a.nbytes is not None else a.size
            nbytes[i] = float(_as_int(size, -1)) if size is not None else math.nan
        columns = {
            "ts": ts,
            "dur": dur,
            "kind": kind,
            "name_id": np.asarray([interner[e.name] for e in xs], dtype=np.int32),
            "pid": _int_column([e.pid for e in xs], 0),
            "tid": _int_column([e.tid for e in xs], 0),
            "corr": _int_column([a.correlation for a in args], -1),
            "ext_id": ext,
            "flops": flops,
            "nbytes": nbytes,
            "dtype": dtype,
        }
        for field, values in columns.items():
            self.parts[field].append(values)

    def set_top(self, top: dict[str, Any]) -> None:
        """Keep the metadata the analyses read; the first value seen of each key wins."""
        for key in ("deviceProperties", "distributedInfo", "host_name"):
            value = top.get(key)
            if value is not None and key not in self.top:
                self.top[key] = value


def _raw(args: dict[str, Any], key: str) -> msgspec.Raw:
    return msgspec.Raw(msgspec.json.encode(args[key])) if key in args else _NULL


def _scalar(value: Any) -> Any:
    """A JSON scalar as is; a list or an object as its str (the name it is interned under)."""
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)


def _to_event(ev: Any) -> _Event | None:
    """A plainly decoded event as the struct the reducer takes; None for all but "X" events."""
    if not isinstance(ev, dict) or ev.get("ph") != "X":
        return None  # metadata (M), flows (s/f), instants (i), counters: not intervals
    a = ev.get("args")
    a = a if isinstance(a, dict) else {}
    args = _Args(
        correlation=a.get("correlation", -1),
        external_id=a.get("External id", _ABSENT),
        external_id_lc=a.get("external id", -1),
        flops=_scalar(a.get("flops")),
        dims=_raw(a, "Input Dims"),
        dims_lc=_raw(a, "Input dims"),
        types=_raw(a, "Input type"),
        concrete=_raw(a, "Concrete Inputs"),
        nbytes=a.get("bytes"),
        size=a.get("size"),
    )
    return _Event(
        cat=_scalar(ev.get("cat", "")),
        name=_scalar(ev.get("name", "")),
        pid=ev.get("pid", 0),
        tid=ev.get("tid", 0),
        ts=ev.get("ts"),
        dur=ev.get("dur"),
        args=args,
    )


def _lenient(events: Any) -> list[Any]:
    if not isinstance(events, list):
        return []
    return [e for e in map(_to_event, events) if e is not None]


def _decode_events(data: Any) -> list[Any]:
    """A JSON array of events; raises msgspec.DecodeError when `data` is not JSON."""
    try:
        return _EVENTS.decode(data)
    except msgspec.ValidationError:
        return _lenient(msgspec.json.decode(data))


def _decode_doc(data: Any) -> tuple[dict[str, Any], list[Any]]:
    """A trace object's top-level metadata and events; raises msgspec.DecodeError."""
    try:
        doc = _DOC.decode(data)
    except msgspec.ValidationError:
        plain = msgspec.json.decode(data)
        if not isinstance(plain, dict):
            raise msgspec.DecodeError("expected a JSON object") from None
        return plain, _lenient(plain.get("traceEvents"))
    top = {
        "deviceProperties": doc.deviceProperties,
        "distributedInfo": doc.distributedInfo,
        "host_name": doc.host_name,
    }
    return top, doc.traceEvents


def _try_cuts(buf: bytearray) -> tuple[list[Any], int] | None:
    """Decode the longest run of whole events at the start of `buf`, trying the last
    `MAX_CUT_TRIES` candidate cuts (a `}` followed by `,`); None when none decodes.

    `buf` starts with "[" (kept there between cuts). The byte after the chosen `}` is
    whitespace or `,`: it is swapped for "]" while msgspec reads the buffer in place, so a
    cut copies nothing.
    """
    end = len(buf)
    for _ in range(MAX_CUT_TRIES):
        p = buf.rfind(b"}", 0, end)
        if p < 0 or p + 1 >= len(buf):
            return None
        after = bytes(buf[p + 1 : p + 65]).lstrip()
        if after.startswith(b","):
            try:
                return _decode_at(buf, p), p + 1
            except msgspec.DecodeError:
                pass  # cut inside a nested value or string: try an earlier `}`
        end = p
    return None


def _decode_at(buf: bytearray, p: int) -> list[Any]:
    """The events of `buf` up to the `}` at `p`, decoded in place; raises DecodeError."""
    saved = buf[p + 1]
    buf[p + 1] = ord("]")
    try:
        # The events' Raw fields point into `buf` (msgspec does not copy them): the caller
        # must drop the events before resizing `buf`.
        return _decode_events(memoryview(buf)[: p + 2])
    finally:
        buf[p + 1] = saved


def _fill(stream: Any, buf: bytearray, target: int) -> bool:
    """Read until `buf` holds `target` bytes; True when the stream ended first."""
    while len(buf) < target:
        chunk = stream.read(max(target - len(buf), 1 << 16))
        if not chunk:
            return True
        buf += chunk
    return False


#: Scanned bytes a structure scan may leave behind a cut and still be dropped (the fast tries
#: then resume): rescanning this much once per cut keeps the cost linear.
_RESCAN_BYTES: Final = 64 << 10


def _read_event_array(stream: Any, buf: bytearray, cols: Columns) -> bytearray:
    """Reduce the events of the array that `buf` starts with ("["), chunk by chunk.

    Returns what is left at the end of the stream: the last events and whatever follows
    the array, for the caller to decode.
    """
    target = CHUNK_BYTES
    scan: _Boundaries | None = None
    while not _fill(stream, buf, target):
        cut = _try_cuts(buf) if scan is None else None
        if cut is None:
            scan = scan or _Boundaries()
            scan.scan(buf)
            p = scan.cut(buf)
            if p is None:  # no complete event in the buffer yet (a huge one): read on
                if len(buf) > cols.limits.event_bytes:
                    raise _OverCap(
                        "event_bytes", "has an event larger than", cols.limits.event_bytes
                    )
                target = len(buf) + CHUNK_BYTES
                continue
            cut = _decode_at(buf, p), p + 1  # the scan says it is whole: errors are real
        events, used = cut
        cols.add(events)
        del cut, events  # releases the Raw views into buf
        comma = buf.index(b",", used)
        del buf[:comma]
        buf[0] = ord("[")
        if scan is not None:
            scan.shift(comma)
            if scan.pos < _RESCAN_BYTES:
                scan = None
        target = CHUNK_BYTES
    return buf


def _read(stream: Any, cols: Columns) -> None:
    buf = bytearray()
    eof = _fill(stream, buf, CHUNK_BYTES)
    first = buf.lstrip()[:1]
    if first == b"[":  # the Chrome trace "JSON array" format: a bare list of events
        del buf[: buf.index(b"[")]
        cols.add(_decode_events(buf if eof else _read_event_array(stream, buf, cols)))
        return
    if first != b"{":
        raise msgspec.DecodeError("expected a JSON object or array at the start")
    match = _EVENTS_KEY.search(buf)
    while match is None and not eof:
        if len(buf) > HEAD_LIMIT_BYTES:
            raise _NoEvents(f"within its first {HEAD_LIMIT_BYTES >> 20} MB")
        eof = _fill(stream, buf, len(buf) + CHUNK_BYTES)
        match = _EVENTS_KEY.search(buf)
    if match is None:  # the whole document is in memory, with no events array in sight
        plain = msgspec.json.decode(buf)
        if not isinstance(plain, dict):
            raise msgspec.DecodeError("expected a JSON object")
        if "traceEvents" not in plain:
            raise _NoEvents("")
        cols.set_top(plain)
        cols.add(_lenient(plain["traceEvents"]))
        return
    if eof:  # the whole document is in memory: one decode
        top, events = _decode_doc(buf)
        cols.set_top(top)
        cols.add(events)
        return
    cols.set_top(_decode_doc(bytes(buf[: match.start()]) + b'"traceEvents":[]}')[0])
    del buf[: match.end() - 1]  # keep the "[" that opens the events
    rest = _read_event_array(stream, buf, cols)
    top, events = _decode_doc(b'{"traceEvents":' + bytes(rest))
    cols.set_top(top)
    cols.add(events)


class _NoEvents(Exception):
    """A JSON object without a `traceEvents` list (where it was looked for, if not anywhere)."""


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as probe:
        return probe.read(2) == GZIP_MAGIC


def read_columns(path: Path, limits: ReadLimits | None = None) -> Columns:
    """The trace's events as columns; raises `TraceError` (one line) on unreadable input or
    input over `limits` (default: `ReadLimits.from_environment()`)."""
    limits = limits or ReadLimits.from_environment()
    cols = Columns(limits)
    gzipped = _is_gzip(path)
    # Decoding allocates hundreds of thousands of short-lived, acyclic objects; the cyclic
    # garbage collector would traverse them again and again for nothing (pausing it cut the
    # load time by ~25% on the A100 trace). Restored however the load ends.
    paused = gc.isenabled()
    gc.disable()
    try:
        # gzip.open owns the file it opens, so closing the stream closes the file too.
        with gzip.open(path, "rb") if gzipped else path.open("rb") as stream:
            _read(_Capped(stream, limits.trace_bytes), cols)
    except (EOFError, zlib.error) as exc:
        raise TraceError(
            f"{path}: the gzip stream is truncated or corrupt ({exc})",
            hint="the profiler may have been killed while writing; re-record the trace",
        ) from None
    except gzip.BadGzipFile as exc:
        raise TraceError(f"{path}: not a valid gzip file ({exc})") from None
    except RecursionError:
        raise TraceError(
            f"{path}: JSON nested deeper than it can be read",
            hint="pass a Chrome/Kineto trace written by torch.profiler",
        ) from None
    except _OverCap as exc:
        variable = ReadLimits.VARIABLES[exc.field]
        raise TraceError(
            f"{path}: the trace {exc.what} {exc.limit} {exc.unit}",
            hint=f"if it is a trace you trust, raise the cap: {variable}={exc.limit * 4}",
        ) from None
    except _NoEvents as exc:
        raise TraceError(
            f"{path}: JSON has no 'traceEvents' list{' ' + str(exc) if str(exc) else ''}",
            hint="pass a Chrome/Kineto trace written by torch.profiler",
        ) from None
    except msgspec.DecodeError as exc:
        raise _not_json(path, gzipped, str(exc)) from None
    finally:
        if paused:
            gc.enable()
    return cols


def _not_json(path: Path, gzipped: bool, reason: str) -> TraceError:
    reason = reason.splitlines()[0][:120] if reason else "empty"
    if path.name.endswith(".gz") and not gzipped:
        # Read as plain JSON whatever the name says; say both when it is neither.
        return TraceError(
            f"{path}: not a gzip file although named .gz, and not valid JSON ({reason})",
            hint="re-export the trace, or pass the .json file torch.profiler wrote",
        )
    if "truncated" in reason:
        return TraceError(
            f"{path}: not valid JSON or truncated ({reason})",
            hint="pass a Chrome/Kineto trace written by torch.profiler",
        )
    return TraceError(f"{path}: not valid JSON ({reason})")
