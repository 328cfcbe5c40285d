"""A trace from anywhere is read with bounded work and memory: crafted traces end in one line.

A 16 kB gzip can decompress to one 16 MB event whose strings are full of `},`, the bytes the
reader cuts at; trying cuts by decoding would then decode the whole buffer at every candidate,
over and over as it grows. These tests count the decoder's bytes instead of timing it
(benchmarks/bench_trace_reader.py times it).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import numpy as np
import pytest
from reference_reader import reference_load

from cli_output import one_error_line
from torchdoctor.analyze import decode, loading
from torchdoctor.cli.main import main
from torchdoctor.core.errors import TraceError

KB = 1 << 10


def _event(i: int, **extra: object) -> dict[str, object]:
    return {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i,
            "dur": 1, **extra}  # fmt: skip


def _cut_filled(path: Path, filler_bytes: int, form: str = "string") -> Path:
    """Small events around one whose argument is `filler_bytes` of `},`: in a string, or as
    a list of empty objects (`{},{},...`), where every `},` is a cut that fails to balance."""
    filler: object = "}," * (filler_bytes // 2)
    if form == "nested":
        filler = [{}] * (filler_bytes // 3)
    events = [_event(i) for i in range(200)]
    events.append(_event(200, args={"note": filler}))
    events += [_event(i) for i in range(201, 400)]
    with gzip.open(path, "wt") as fh:
        json.dump({"traceEvents": events}, fh)
    return path


def _count_decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes each call of the events decoder is handed, appended as it is called."""
    sizes: list[int] = []
    real = decode._decode_events

    def counting(data: object) -> list[object]:
        sizes.append(len(data))  # type: ignore[arg-type]
        return real(data)

    monkeypatch.setattr(decode, "_decode_events", counting)
    return sizes


@pytest.mark.parametrize("form", ["string", "nested"])
def test_an_event_full_of_cut_bytes_costs_linear_decoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    monkeypatch.setattr(decode, "CHUNK_BYTES", 16 * KB)
    sizes = _count_decoded(monkeypatch)
    work = {}
    for filler in (256 * KB, 512 * KB, 1024 * KB):
        sizes.clear()
        timeline = loading.load_trace(_cut_filled(tmp_path / f"{filler}.gz", filler, form))
        assert timeline.names == [f"op{i}" for i in range(400)]
        work[filler] = sum(sizes)
    # The decoder reads each byte a bounded number of times: a few tries of one chunk, then
    # the scan's one decode. Trying 64 cuts of the whole buffer per chunk read decoded
    # ~1 GB for the 1 MB event.
    for filler, decoded in work.items():
        assert decoded <= 3 * filler + 64 * KB, work
    assert work[1024 * KB] <= 2.5 * work[256 * KB] * 2, work  # doubling the event: ~doubling


@pytest.mark.parametrize(("name", "chunk"), [("tracelens_h100_qwen15_05b.json.gz", 1 << 16)])
def test_the_structure_scan_alone_reads_real_traces_like_the_reference(
    shared_traces: Path, monkeypatch: pytest.MonkeyPatch, name: str, chunk: int
) -> None:
    # No decoding tries: every cut is found by the scan (strings, escapes, nesting).
    monkeypatch.setattr(decode, "MAX_CUT_TRIES", 0)
    monkeypatch.setattr(decode, "CHUNK_BYTES", chunk)
    path = shared_traces / name
    got, want = loading.load_trace(path), reference_load(path)
    assert got.names == want.names
    for col in decode.Columns.FIELDS:
        np.testing.assert_array_equal(getattr(got, col), getattr(want, col), err_msg=col)


def test_the_scan_follows_escapes_and_strings_split_between_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(decode, "MAX_CUT_TRIES", 0)
    monkeypatch.setattr(decode, "CHUNK_BYTES", 7)  # every string and escape split somewhere
    events = [_event(i, args={"s": 'a\\"},{"\\\\', "t": ["]}", {"u": "[{"}]}) for i in range(50)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert loading.load_trace(path).names == [f"op{i}" for i in range(50)]


def test_an_event_over_its_cap_is_one_trace_error_read_no_further(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(decode, "CHUNK_BYTES", 16 * KB)
    path = _cut_filled(tmp_path / "big.json.gz", 1024 * KB)
    limits = decode.ReadLimits(event_bytes=128 * KB)
    read: list[int] = []
    real = decode._Capped.read

    def counted(self: decode._Capped, size: int) -> bytes:
        data = real(self, size)
        read.append(len(data))
        return data

    monkeypatch.setattr(decode._Capped, "read", counted)
    with pytest.raises(TraceError, match="an event larger than 131072 bytes") as raised:
        decode.read_columns(path, limits)
    assert "TORCHDOCTOR_MAX_EVENT_BYTES" in str(raised.value)
    assert sum(read) <= 128 * KB + 64 * KB + 16 * KB  # the cap, one read and a chunk: not 1 MB
    # Raised by its variable, the same trace reads.
    monkeypatch.setenv("TORCHDOCTOR_MAX_EVENT_BYTES", str(4 << 20))
    assert len(decode.read_columns(path).names) == 400


def test_a_trace_over_its_decompressed_cap_stops_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _cut_filled(tmp_path / "t.json.gz", 256 * KB)
    monkeypatch.setenv("TORCHDOCTOR_MAX_TRACE_BYTES", str(64 * KB))
    with pytest.raises(TraceError, match="decompresses to more than 65536 bytes"):
        decode.read_columns(path)
    monkeypatch.setenv("TORCHDOCTOR_MAX_TRACE_BYTES", "lots")
    with pytest.raises(TraceError, match="not a positive whole number"):
        decode.read_columns(path)


def test_a_long_name_is_refused_before_it_reaches_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHDOCTOR_RUNS_DIR", str(tmp_path / "runs"))
    path = tmp_path / "name.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"traceEvents": [{**_event(0), "name": "A" * (decode.MAX_NAME_CHARS + 1)}]}, fh)
    out = tmp_path / "run"
    assert main(["analyze", str(path), "--out", str(out)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "event name longer than" in line and "TORCHDOCTOR_MAX_NAME_CHARS" in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"traceEvents": [{"ph": "X", "args": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}]}",
         "nested deeper"),
        ('{"traceEvents": [{"ph": "X", "name": ' + "[" * 5000 + "]" * 5000 + "}]}",
         "nested deeper"),
    ],
)  # fmt: skip
def test_deep_nesting_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    path = tmp_path / "deep.json"
    path.write_text(text)
    assert main(["analyze", str(path), "--no-report"]) == 2
    assert expected in one_error_line(capsys.readouterr().err)


def test_numbers_past_int64_and_float_are_no_traceback(tmp_path: Path) -> None:
    huge_dims = {"Input Dims": [[10**400, 3], [3, 4]], "Input type": ["float", "float"]}
    events = [
        {**_event(0), "name": "aten::mm", "args": huge_dims},
        {**_event(1), "pid": 10**30, "tid": -(10**30)},
        {**_event(2), "ts": 10**400},
        {**_event(3), "cat": "kernel", "args": {"correlation": 10**30, "External id": 10**20}},
        {**_event(4), "args": {"flops": 10**400}},
    ]
    path = tmp_path / "big.json"
    path.write_bytes(msgspec.json.encode({"traceEvents": events}))
    timeline = loading.load_trace(path)
    assert timeline.names == ["aten::mm", "op1", "op3", "op4"]  # ts past float's range: skipped
    assert timeline.pid.tolist() == [1, 0, 1, 1] and np.isnan(timeline.flops[0])
