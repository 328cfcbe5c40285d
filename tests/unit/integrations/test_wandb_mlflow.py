"""A run folder's figures logged to Weights & Biases (offline) and MLflow (a local store), read
back through each library's own files or client."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from torchdoctor.integrations import log_to_mlflow, log_to_wandb
from torchdoctor.integrations.scalars import scalars_of
from torchdoctor.tune import TuneResult

sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
from report_samples import make_run


def _wandb_history(run_file: Path) -> list[dict[str, float]]:
    """The history rows of an offline run's `.wandb` file: W&B's 7-byte header, then a
    LevelDB-style log of protobuf `Record`s in 32 KiB blocks (a 7-byte header per chunk:
    checksum, length, kind: 1 whole, 2 first, 3 middle, 4 last)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = run_file.read_bytes()
    assert data[:4] == b":W&B"
    block, pos, pending, rows = 32768, 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack_from("<IHB", data, pos)
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending + chunk)
            pending = b""
            if record.WhichOneof("record_type") == "history":
                rows.append(
                    {
                        i.key or "/".join(i.nested_key): float(i.value_json)
                        for i in record.history.item
                    }
                )
        elif kind in (2, 3):
            pending += chunk
    return rows


def test_a_tuning_run_folder_reaches_wandb_offline(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = make_run(tmp_path)
    logged = log_to_wandb(run_dir, mode="offline", directory=tmp_path, name="demo")
    assert logged == len(scalars_of(run_dir)) > 0
    # The run's file is written by wandb's own service process, which may still be flushing
    # its log when `finish` returns on a loaded host; its teardown waits for it to end.
    import wandb

    wandb.teardown()
    (run_file,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    rows = _wandb_history(run_file)
    result = TuneResult.read(run_dir / "tune.json")
    ladder = [r for r in rows if "tune/ladder/speedup_vs_baseline" in r]
    assert [r["step/tune/ladder/speedup_vs_baseline"] for r in ladder] == [
        r.step for r in result.ladder.rungs
    ]
    assert [r["tune/ladder/speedup_vs_baseline"] for r in ladder] == pytest.approx(
        [r.speedup_vs_baseline for r in result.ladder.rungs]
    )
    (headline,) = [r["tune/speedup"] for r in rows if "tune/speedup" in r]
    assert headline == pytest.approx(result.speedup)


def test_a_tuning_run_folder_reaches_a_local_mlflow_store(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    run_dir = make_run(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_id = log_to_mlflow(run_dir, tracking_uri=uri, experiment="td-test")
    client = MlflowClient(tracking_uri=uri)
    result = TuneResult.read(run_dir / "tune.json")
    ladder = client.get_metric_history(run_id, "tune/ladder/speedup_vs_baseline")
    by_step = sorted((m.step, m.value) for m in ladder)
    assert [step for step, _ in by_step] == [r.step for r in result.ladder.rungs]
    assert [value for _, value in by_step] == pytest.approx(
        [r.speedup_vs_baseline for r in result.ladder.rungs]
    )
    (headline,) = client.get_metric_history(run_id, "tune/speedup")
    assert headline.value == pytest.approx(result.speedup)
    assert client.get_run(run_id).info.status == "FINISHED"
    # a second call logs into the same run when given its id, and leaves it as it was
    log_to_mlflow(run_dir, run_id=run_id, tracking_uri=uri)
    assert len(client.get_metric_history(run_id, "tune/speedup")) == 2
