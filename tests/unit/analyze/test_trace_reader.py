"""The one trace reader (msgspec, bounded chunks) loads exactly what an event-by-event
reference reduction of `json.load` gives, for real traces, odd events and both layouts."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from reference_reader import reference_load

from torchdoctor.analyze import decode, loading
from torchdoctor.analyze.timeline import Timeline
from torchdoctor.core.errors import TraceError

# (trace, chunk size): the A100 trace (26 MB) spans two default chunks; 64 kB chunks force
# hundreds of cuts on the Qwen trace.
REAL = (
    ("hta_a100_ws16_rank0.json.gz", decode.CHUNK_BYTES),
    ("tracelens_h100_qwen15_05b.json.gz", 1 << 16),
    ("hta_cpu_only.json.gz", decode.CHUNK_BYTES),
)
COLUMNS = decode.Columns.FIELDS


def _assert_same(a: Timeline, b: Timeline) -> None:
    assert a.names == b.names
    assert a.base_us == b.base_us and a.meta == b.meta
    for col in COLUMNS:
        np.testing.assert_array_equal(getattr(a, col), getattr(b, col), err_msg=col)


@pytest.mark.parametrize(("name", "chunk"), REAL)
def test_reader_equals_the_reference_on_real_traces(
    shared_traces: Path, monkeypatch: pytest.MonkeyPatch, name: str, chunk: int
) -> None:
    path = shared_traces / name
    monkeypatch.setattr(decode, "CHUNK_BYTES", chunk)
    _assert_same(loading.load_trace(path), reference_load(path))


def _write(tmp_path: Path, doc: object, name: str = "t.json.gz") -> Path:
    path = tmp_path / name
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    return path


def _event(name: str, ts: object, dur: object, **args: object) -> dict[str, object]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
            "dur": dur, "args": args}  # fmt: skip


def test_odd_events_match_the_reference(tmp_path: Path) -> None:
    events = [
        _event("aten::mm", 10, 5, **{"Input Dims": [[2, 3], [3, 4]], "Input type": ["float"] * 2}),
        _event("aten::mm", 20, 5, **{"Input Dims": [[2, 3], [3, 4]], "Input type": ["float"] * 2}),
        _event("aten::add", 30, -1),
        _event("aten::add", None, 3),
        _event("aten::relu", 40.5, 2, **{"external id": 7}),
        {"ph": "X", "cat": "Trace", "name": "whole", "ts": 0, "dur": 100},
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy HtoD",
            "pid": "stream 7",
            "tid": 7,
            "ts": 50,
            "dur": 4,
            "args": {"bytes": 4096, "correlation": 3},
        },
        {"ph": "i", "name": "instant", "ts": 60},
        {"ph": "s", "id": 3, "pid": 1, "tid": 1, "ts": 10, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 3, "pid": 0, "tid": 7, "ts": 50, "cat": "ac2g", "bp": "e"},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
    ]
    path = _write(tmp_path, {"traceEvents": events, "distributedInfo": {"rank": 3}})
    fast = loading.load_trace(path)
    _assert_same(fast, reference_load(path))
    assert fast.meta.rank == 3 and fast.meta.skipped_events == 2
    assert fast.flops[0] == 2 * 2 * 3 * 4 and fast.nbytes[0] == (6 + 12 + 8) * 4


@pytest.mark.parametrize(
    "doc",
    [
        [_event("aten::mm", 1, 1)],  # the bare Chrome "JSON array" format
        {"traceEvents": [{"ph": "X", "name": "x", "ts": 1, "dur": 1, "args": None}]},
        {"traceEvents": [{"ph": "X", "name": ["unhashable"], "ts": 1, "dur": 1}]},
        # an event with no phase, or a phase outside the Chrome trace format
        {"traceEvents": [_event("aten::mm", 1, 1), {"name": "no ph", "ts": 2}]},
        {"traceEvents": [_event("aten::mm", 1, 1), {"ph": "Q", "name": "odd", "ts": 2}]},
    ],
)
def test_unusual_layouts_are_read_like_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, doc: object
) -> None:
    path = _write(tmp_path, doc)
    timeline = loading.load_trace(path)
    assert len(timeline) == 1
    _assert_same(timeline, reference_load(path))
    # The same layout cut into many chunks: each piece is re-decoded on its own.
    events = doc if isinstance(doc, list) else doc["traceEvents"]  # type: ignore[index]
    many = events * 2000
    big = _write(tmp_path, many if isinstance(doc, list) else {"traceEvents": many}, "big.json")
    monkeypatch.setattr(decode, "CHUNK_BYTES", 4096)
    timeline = loading.load_trace(big)
    assert len(timeline) == 2000
    _assert_same(timeline, reference_load(big))


def test_chunk_cuts_inside_strings_and_metadata_after_the_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Names containing "}, {" put false event boundaries inside strings; the metadata comes
    # after traceEvents, so it is read from the last chunk.
    events = [
        _event(f'aten::odd}}, {{"ph": "X"}}, {{ {i}', 10.0 * i, 5, **{"External id": i})
        for i in range(3000)
    ]
    doc = {"traceEvents": events, "deviceProperties": [{"name": "NVIDIA A100-SXM4-80GB"}]}
    path = _write(tmp_path, doc)
    monkeypatch.setattr(decode, "CHUNK_BYTES", 4096)
    cols = decode.read_columns(path)
    assert cols.top["deviceProperties"][0]["name"].startswith("NVIDIA")
    timeline = loading.load_trace(path)
    assert len(timeline) == 3000 and timeline.meta.device_name == "NVIDIA A100-SXM4-80GB"
    _assert_same(timeline, reference_load(path))


@pytest.mark.parametrize(
    "values",
    [
        [1, 2, 3],
        [True, False, 7],
        [1.9, -1.9, 3],  # floats truncate toward zero, as int() does
        [1.5, float("nan"), float("inf"), 4],  # non-finite: the default
        ["12", "0x1f", "012", "stream 7", None, 5],  # strings and null: per value
        [2**62, 1.0],
    ],
)
def test_int_column_matches_the_exact_conversion(values: list[object]) -> None:
    expected = np.asarray([decode._as_int(v, -1) for v in values], dtype=np.int64)
    np.testing.assert_array_equal(decode._int_column(values, -1), expected)


def test_float_column_defers_non_numbers() -> None:
    np.testing.assert_array_equal(decode._float_column([1, 2.5, True]), [1.0, 2.5, 1.0])
    assert decode._float_column([1.0, None]) is None
    assert decode._float_column([1.0, "2"]) is None


@pytest.mark.parametrize("events", [[], [_event("aten::mm", 1, 1)]])
def test_gzip_is_told_by_its_bytes_not_its_name(tmp_path: Path, events: list[object]) -> None:
    # A plain-JSON trace named .json.gz reads exactly as the same file named .json (an empty
    # one too), and a gzipped one named .json as the same named .json.gz.
    text = json.dumps({"traceEvents": events})
    plain, misnamed = tmp_path / "a.json", tmp_path / "b.json.gz"
    plain.write_text(text)
    misnamed.write_text(text)
    zipped, zipped_plain_name = tmp_path / "c.json.gz", tmp_path / "d.json"
    zipped.write_bytes(gzip.compress(text.encode()))
    zipped_plain_name.write_bytes(gzip.compress(text.encode()))
    reference = loading.load_trace(plain)
    for other in (misnamed, zipped, zipped_plain_name):
        timeline = loading.load_trace(other)
        assert timeline.names == reference.names and len(timeline) == len(events)
        for col in COLUMNS:
            np.testing.assert_array_equal(getattr(timeline, col), getattr(reference, col))


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("a.json.gz", b"neither gzip nor json", "not a gzip file although named .gz"),
        ("a.json", b'[{"ph": "X", ', "not valid JSON or truncated"),
        ("a.json", b'{"traceEvents": [1 2]}', "not valid JSON"),
        ("a.json", b"", "not valid JSON"),
        ("a.json", b'{"events": []}', "no 'traceEvents' list"),
    ],
)
def test_bad_input_is_one_trace_error(
    tmp_path: Path, name: str, content: bytes, expected: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TraceError, match=expected):
        loading.load_trace(path)


def test_a_truncated_big_trace_is_a_trace_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Cut mid-stream after many chunks: the error comes from the last piece, not a crash.
    path = tmp_path / "t.json"
    text = json.dumps({"traceEvents": [_event("aten::mm", i, 1) for i in range(3000)]})
    path.write_text(text[: len(text) * 2 // 3])
    monkeypatch.setattr(decode, "CHUNK_BYTES", 4096)
    with pytest.raises(TraceError, match="not valid JSON or truncated"):
        loading.load_trace(path)
