from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import ClassVar

import pytest

from torchdoctor.core.errors import RecordError
from torchdoctor.core.io import atomic_path, atomic_write_text
from torchdoctor.core.records import Record, peek_schema


class Point(Record):
    schema_name: ClassVar[str] = "test.point"
    schema_version: ClassVar[int] = 2
    x: float
    label: str


def test_round_trip_carries_schema_and_version(tmp_path: Path) -> None:
    p = Point(x=1.5, label="a")
    d = p.to_json_dict()
    assert d["schema"] == "torchdoctor/test.point"
    assert d["version"] == 2
    path = p.write(tmp_path / "p.json")
    assert Point.read(path) == p
    assert peek_schema(path) == ("torchdoctor/test.point", 2)


def test_records_are_frozen() -> None:
    p = Point(x=1.0, label="a")
    with pytest.raises(Exception, match="frozen"):
        p.x = 2.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"schema": "torchdoctor/other", "version": 1}, "expected 'torchdoctor/test.point'"),
        ({"schema": "torchdoctor/test.point", "version": 3, "x": 1, "label": "a"}, "version 3"),
        ({"schema": "torchdoctor/test.point", "version": 1, "x": "no", "label": "a"}, "field x"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_bad_records_raise_record_error(payload: object, message: str) -> None:
    with pytest.raises(RecordError, match=message):
        Point.from_json_dict(payload)


def test_truncated_file_names_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(Point(x=1, label="a").to_json()[:10])
    with pytest.raises(RecordError, match="not valid JSON"):
        Point.read(path)
    with pytest.raises(RecordError, match="no such file"):
        Point.read(tmp_path / "missing.json")


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    atomic_write_text(target, json.dumps({"a": 1}))
    assert json.loads(target.read_text()) == {"a": 1}
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "never.json") as tmp:
        tmp.write_text("partial")
        raise RuntimeError("killed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_atomic_writes_honour_the_umask_like_a_plain_file(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        written = atomic_write_text(tmp_path / "a.json", "{}")
        with atomic_path(tmp_path / "b.bin") as tmp:
            tmp.write_bytes(b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(written.stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "b.bin").stat().st_mode) == 0o644
