"""TensorBoard scalars of torchdoctor's results, read back by TensorBoard's own reader."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from torchdoctor.core.errors import RecordError
from torchdoctor.tune import TuneResult

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import (
    EventAccumulator,
)

from torchdoctor.integrations import write_scalars

sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
from report_samples import make_plain_run, make_run, run_result_record


def _read(log_dir: Path) -> EventAccumulator:
    events = EventAccumulator(str(log_dir))
    events.Reload()
    return events


def test_a_tuning_run_folder_reads_back(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path)
    written = write_scalars(run_dir, tmp_path / "tb")
    events = _read(tmp_path / "tb")
    tags = set(events.Tags()["scalars"])
    assert written > 0
    assert {"tune/speedup", "tune/ladder/speedup_vs_baseline", "steps/step_time_s"} <= tags
    assert any(t.startswith("diagnosis/phase_share/") for t in tags)
    result = TuneResult.read(run_dir / "tune.json")
    (speedup,) = events.Scalars("tune/speedup")
    assert speedup.value == pytest.approx(result.speedup, rel=1e-6)
    ladder = events.Scalars("tune/ladder/speedup_vs_baseline")
    assert [e.step for e in ladder] == [r.step for r in result.ladder.rungs]


def test_a_run_record_reads_back_per_step(tmp_path: Path) -> None:
    run = run_result_record()
    write_scalars(run, tmp_path / "tb")
    events = _read(tmp_path / "tb")
    steps = events.Scalars("run/step_time_s")
    assert [e.step for e in steps] == [s.index for s in run.steps]
    assert steps[0].value == pytest.approx(run.steps[0].total_s, rel=1e-6)
    (rate,) = events.Scalars("run/samples_per_s")
    assert rate.value == pytest.approx(run.samples_per_s, rel=1e-6)


def test_a_path_that_is_no_run_folder_is_a_record_error(tmp_path: Path) -> None:
    with pytest.raises(RecordError):
        write_scalars(tmp_path / "nothing", tmp_path / "tb")
    assert make_plain_run(tmp_path).is_dir()


def test_report_writes_scalars_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from torchdoctor.cli import main as cli_main

    run_dir = make_run(tmp_path)
    logs = tmp_path / "tb"
    argv = ["report", str(run_dir / "tune.json"), "-f", "md", "--tensorboard", str(logs)]
    assert cli_main.main(argv) == 0
    assert "TensorBoard:" in capsys.readouterr().err
    assert "tune/speedup" in _read(logs).Tags()["scalars"]


def test_a_serving_result_reads_back(tmp_path: Path) -> None:
    from test_serve_section import serve_record

    result = serve_record()
    write_scalars(result, tmp_path / "tb")
    events = _read(tmp_path / "tb")
    (p99,) = events.Scalars("serve/latency_p99_s")
    expected = next(p for p in result.latency.summary.percentiles if p.percentile == 99)
    assert p99.value == pytest.approx(expected.value_s, rel=1e-6)
    curve = events.Scalars("serve/batch_size/samples_per_s")
    assert [e.step for e in curve] == [p.batch_size for p in result.curves[0].points]
