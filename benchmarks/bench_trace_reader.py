"""Benchmark: the trace reader on crafted traces beside real ones of the same size.

A trace comes from anywhere. Two crafted shapes are read beside a real trace of the same
decompressed size (the first events of the A100 rank-0 trace in tests/data/traces, cut to
that size, with its metadata):

- cut string / cut nested: one event whose argument is S bytes of ``},``, the bytes the
  reader cuts at, among a thousand ordinary events: inside a string, or as a list of empty
  objects. Trying cuts by decoding alone decoded the whole buffer
  at each of 64 candidates and grew it by a megabyte at a time (quadratic); the structure
  scan that takes over reads each byte once, so its time per MB should stay flat as S grows.
- long name: one event whose name is S bytes. It is refused at the one-event cap
  (`MAX_EVENT_BYTES`) or the name cap, with one line; reported is what the refusal costs.

For each, the reader (`analyze.decode.read_columns`, the one reader) runs in this process:
wall and CPU time of the best of --repeat runs, then, in a separate run under tracemalloc
(which slows it), the peak of Python allocations. The one-event cap is raised for the
cut-bytes traces, whose events pass 16 MB at S = 16 MB. The machine is shared: CPU time is
the steadier figure.

    python benchmarks/bench_trace_reader.py [--sizes 2,4,8,16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import time
import tracemalloc
from pathlib import Path

from torchdoctor.analyze import decode
from torchdoctor.core.errors import TraceError

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / "tests" / "data" / "traces" / "hta_a100_ws16_rank0.json.gz"
MB = 1 << 20
SMALL_EVENTS = 1000


def _small(i: int) -> dict[str, object]:
    return {"ph": "X", "cat": "cpu_op", "name": f"op{i % 50}", "pid": 1, "tid": 1, "ts": i,
            "dur": 1}  # fmt: skip


def write_cut_bytes(path: Path, size: int, nested: bool = False) -> Path:
    """`},` in a string, or `nested`: as a list of empty objects (`[{},{},...]`), whose every
    `},` is a cut that leaves the piece unbalanced, and which msgspec must parse to say so."""
    filler: object = [{}] * (size // 3) if nested else "}," * (size // 2)
    events = [_small(i) for i in range(SMALL_EVENTS // 2)]
    events.append({**_small(SMALL_EVENTS), "args": {"note": filler}})
    events += [_small(i) for i in range(SMALL_EVENTS // 2, SMALL_EVENTS)]
    with gzip.open(path, "wt", compresslevel=9) as fh:
        json.dump({"traceEvents": events}, fh)
    return path


def write_long_name(path: Path, size: int) -> Path:
    with gzip.open(path, "wt", compresslevel=9) as fh:
        json.dump({"traceEvents": [{**_small(0), "name": "A" * size}]}, fh)
    return path


def write_real(path: Path, size: int) -> Path:
    """The A100 trace's metadata and its first events, up to `size` bytes of JSON."""
    with gzip.open(REAL, "rt") as fh:
        doc = json.load(fh)
    kept, used = [], 0
    for event in doc["traceEvents"]:
        text = json.dumps(event)
        if used + len(text) > size:
            break
        kept.append(event)
        used += len(text) + 2
    doc["traceEvents"] = kept
    with gzip.open(path, "wt", compresslevel=6) as fh:
        json.dump(doc, fh)
    return path


def decompressed_bytes(path: Path) -> int:
    with gzip.open(path, "rb") as fh:
        return sum(len(chunk) for chunk in iter(lambda: fh.read(MB), b""))


def read_once(path: Path, limits: decode.ReadLimits) -> tuple[float, float, str]:
    """Wall and CPU seconds of one read, and what came of it (events, or the refusal)."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        cols = decode.read_columns(path, limits)
        outcome = f"{len(cols.names)} names"
    except TraceError as exc:
        outcome = "refused: " + str(exc).split(": ", 1)[1].split(";")[0]
    return time.perf_counter() - wall, time.process_time() - cpu, outcome


def peak_mb(path: Path, limits: decode.ReadLimits) -> float:
    tracemalloc.start()
    try:
        read_once(path, limits)
        return tracemalloc.get_traced_memory()[1] / MB
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2,4,8,16", help="MB of decompressed JSON")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    raised = decode.ReadLimits(event_bytes=4 * max(sizes) * MB)
    default = decode.ReadLimits()
    header = (
        f"{'trace':<11} {'MB':>4} {'gzip kB':>8} {'wall s':>7} {'cpu s':>7} {'cpu s/MB':>8} "
        f"{'peak MB':>8}  outcome"
    )
    print(header)
    print("-" * len(header))
    per_mb: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            folder, n = Path(tmp), size * MB
            cases = (
                ("real", write_real(folder / f"real{size}.json.gz", n), default),
                ("cut string", write_cut_bytes(folder / f"cut{size}.json.gz", n), raised),
                ("cut nested", write_cut_bytes(folder / f"nest{size}.gz", n, nested=True), raised),
                ("long name", write_long_name(folder / f"name{size}.json.gz", n), default),
            )
            for label, path, limits in cases:
                runs = [read_once(path, limits) for _ in range(args.repeat)]
                wall = min(r[0] for r in runs)
                cpu = min(r[1] for r in runs)
                real_mb = decompressed_bytes(path) / MB
                per_mb.setdefault(label, []).append(cpu / real_mb)
                print(
                    f"{label:<11} {real_mb:>4.1f} {path.stat().st_size / 1024:>8.0f} "
                    f"{wall:>7.3f} {cpu:>7.3f} {cpu / real_mb:>8.3f} "
                    f"{peak_mb(path, limits):>8.1f}  {runs[0][2]}"
                )
    print()
    for label, values in per_mb.items():
        growth = values[-1] / values[0] if values[0] else float("nan")
        print(
            f"{label}: CPU s per MB from {sizes[0]} to {sizes[-1]} MB x{growth:.2f} (1.0: linear)"
        )


if __name__ == "__main__":
    main()
