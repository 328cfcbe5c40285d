"""`torchdoctor analyze` end to end, in-process: real traces, --json, and every bad input."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchdoctor.analyze import TraceAnalysis
from torchdoctor.cli.main import main

SHARED_TRACES = Path(__file__).parents[1] / "data" / "traces"
BERT = SHARED_TRACES / "tracelens_h100_bert_small.json.gz"


def _event(name: str, ts: float, dur: float | None, cat: str = "cpu_op") -> dict[str, object]:
    ev: dict[str, object] = {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts}
    if dur is not None:
        ev["dur"] = dur
    return ev


def test_rich_output_on_a_real_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(BERT), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "device timeline" in out and "step breakdown" in out and "top ops" in out
    assert "92.1%" in out  # the idle share TraceLens reports


def test_json_output_is_the_versioned_record(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "analyze", str(BERT), "--top", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (
        data["schema"] == "torchdoctor/trace_analysis"
        and data["version"] == TraceAnalysis.schema_version
    )
    assert data["cuda_capability"] == [9, 0]  # an H100 (deviceProperties computeMajor/Minor)
    assert data["device_timeline"]["idle_pct"] == pytest.approx(92.082, abs=0.5)
    assert len(data["ops"]) == 2


def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    not_gzip = tmp / "a.json.gz"  # gzip is told by its bytes: plain JSON so named is read
    not_gzip.write_text("neither gzip nor json")
    full = gzip.compress(
        json.dumps({"traceEvents": [_event("x", i, 1) for i in range(500)]}).encode()
    )
    truncated = tmp / "b.json.gz"
    truncated.write_bytes(full[: len(full) // 2])
    not_json = tmp / "c.json"
    not_json.write_text("this is not json {")
    no_events = tmp / "d.json"
    no_events.write_text('{"schemaVersion": 1, "events": []}')
    empty_dir = tmp / "empty"
    empty_dir.mkdir()
    return {
        "not gzip": (not_gzip, "not a gzip file"),
        "truncated gzip": (truncated, "truncated"),
        "not json": (not_json, "not valid JSON"),
        "no traceEvents": (no_events, "no 'traceEvents'"),
        "empty folder": (empty_dir, "no trace files"),
        "missing path": (tmp / "nope.json", "no such file"),
    }


@pytest.mark.parametrize(
    "case",
    ["not gzip", "truncated gzip", "not json", "no traceEvents", "empty folder", "missing path"],
)
def test_bad_input_is_one_line_and_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, expected = _bad_inputs(tmp_path)[case]
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) <= 3  # one message (rich may wrap a long path)


def test_events_with_missing_or_negative_duration_are_skipped_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = [
        _event("ProfilerStep#1", 0, 100, cat="user_annotation"),
        _event("aten::mm", 10, 40),
        _event("aten::broken", 20, -5),
        _event("aten::nodur", 30, None),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert main(["--json", "analyze", str(path)]) == 0
    captured = capsys.readouterr()
    assert "skipped 2 event(s)" in captured.err
    data = json.loads(captured.out)
    assert [o["name"] for o in data["ops"]] == ["aten::mm"]
    assert data["step_breakdown"]["CPU Exec"] == pytest.approx(40.0)


def _threads_after(code: str, env: dict[str, str]) -> tuple[int, str | None]:
    """(threads of a fresh interpreter after `code`, its OPENBLAS_NUM_THREADS then)."""
    probe = (
        "import os, sys\n"
        f"{code}\n"
        "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    threads, value = proc.stdout.split()[-2:]
    return int(threads), None if value == "None" else value


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_analyze_loads_numpy_with_one_blas_thread_and_restores_the_env(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [_event("aten::mm", 0, 5)]}))
    run = (
        "from torchdoctor.cli.main import main\n"
        "sys.stdout = open(os.devnull, 'w')\n"
        f"assert main(['--json', 'analyze', {str(trace)!r}]) == 0\n"
        "sys.stdout = sys.__stdout__"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
    }
    assert _threads_after(run, env) == (1, None)
    if (os.cpu_count() or 1) > 1:  # the control: numpy alone starts BLAS workers here
        assert _threads_after("import numpy", env)[0] > 1
        # A user's own setting is respected, and left in place.
        assert _threads_after(run, {**env, "OPENBLAS_NUM_THREADS": "2"}) == (2, "2")


def test_analyze_writes_a_run_folder_with_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["analyze", str(BERT), "--top", "3", "--out", str(out)]) == 0
    assert "report.html" in capsys.readouterr().out
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["kind"] == "analyze" and manifest["status"] == "complete"
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["schema"] == "torchdoctor/trace_analysis"
    assert "<svg" in (out / "report.html").read_text()


def test_analyze_bad_trace_leaves_no_run_folder(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    out = tmp_path / "run"
    assert main(["analyze", str(bad), "--out", str(out)]) == 2
    assert not out.exists()


def test_no_report_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHDOCTOR_RUNS_DIR", str(tmp_path / "runs"))
    assert main(["analyze", str(BERT), "--top", "2", "--no-report"]) == 0
    assert not (tmp_path / "runs").exists()
