"""Hand-made Kineto traces for unit tests: complete ('X') events and a file writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def op_event(
    name: str,
    ts: float,
    dur: float,
    dims: list[Any] | None = None,
    types: list[str] | None = None,
    *,
    cat: str = "cpu_op",
    tid: int = 1,
    **args: Any,
) -> dict[str, Any]:
    """One complete event; `dims`/`types` become its "Input Dims"/"Input type"."""
    if dims is not None:
        args["Input Dims"] = dims
    if types is not None:
        args["Input type"] = types
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def write_trace(path: Path, events: list[dict[str, Any]], device: str | None = None) -> Path:
    """Write `events` as a trace at `path`, naming `device` in deviceProperties if given."""
    doc: dict[str, Any] = {"schemaVersion": 1, "traceEvents": events}
    if device is not None:
        doc["deviceProperties"] = [{"id": 0, "name": device}]
    path.write_text(json.dumps(doc))
    return path
