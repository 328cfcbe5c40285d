from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.core.errors import RecordError
from torchdoctor.core.rundir import (
    MANIFEST,
    display_path,
    finish_run_dir,
    new_run_dir,
    read_manifest,
)


def test_new_run_dir_is_marked_running_until_finished(tmp_path: Path) -> None:
    run = new_run_dir("tune", "cnn", out=tmp_path / "r1")
    assert (run / MANIFEST).is_file()
    assert read_manifest(run).status == "running"
    done = finish_run_dir(run)
    assert done.status == "complete" and done.finished is not None
    assert read_manifest(run).status == "complete"


def test_failed_run_keeps_its_reason(tmp_path: Path) -> None:
    run = new_run_dir("diagnose", "train.py", out=tmp_path / "r2")
    finish_run_dir(run, error="script exited with code 3")
    m = read_manifest(run)
    assert m.status == "failed" and m.error == "script exited with code 3"


def test_default_folders_are_unique(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TORCHDOCTOR_RUNS_DIR")
    a = new_run_dir("run", "mlp")
    b = new_run_dir("run", "mlp")
    assert a != b and a.is_dir() and b.is_dir()
    assert a.parent == b.parent == Path("torchdoctor-runs")


def test_runs_root_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHDOCTOR_RUNS_DIR", str(tmp_path / "elsewhere"))
    assert new_run_dir("analyze", "t.json.gz").parent == tmp_path / "elsewhere"


def test_read_manifest_errors(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="no such run folder"):
        read_manifest(tmp_path / "missing")
    with pytest.raises(RecordError, match="not a torchdoctor run folder"):
        read_manifest(tmp_path)


def test_display_path_is_relative_inside_the_cwd_and_absolute_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = tmp_path / "work"
    inside.mkdir()
    monkeypatch.chdir(inside)
    assert display_path(inside / "runs" / "r1") == str(Path("runs") / "r1")
    assert display_path(tmp_path / "elsewhere") == str(tmp_path / "elsewhere")


def test_a_refused_report_marks_the_finished_run_failed(tmp_path: Path) -> None:
    import errno
    import json

    from torchdoctor.core.rundir import finishing

    run = new_run_dir("tune", "mlp", out=tmp_path / "run")

    def full_disk() -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(run / "report.html"))

    refused = pytest.raises(RecordError, match=r"cannot write .*report.html: No space left")
    with refused, finishing(run, reports=full_disk):
        (run / "record.json").write_text("{}")
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "failed" and "No space left" in manifest["error"]
    with finishing(run, reports=lambda: None):
        pass
    assert json.loads((run / "run.json").read_text())["status"] == "complete"


def test_an_interrupted_run_says_so_and_names_its_folder(tmp_path: Path) -> None:
    from torchdoctor.core.interrupt import Interrupted
    from torchdoctor.core.rundir import marking_interruption

    run = new_run_dir("tune", "cnn", out=tmp_path / "r3")
    with pytest.raises(Interrupted) as info, marking_interruption(run):
        raise KeyboardInterrupt
    assert info.value.run_dir == run and info.value.exit_code == 130
    m = read_manifest(run)
    assert m.status == "interrupted" and m.error == "interrupted by SIGINT"
    assert m.finished is not None


def test_marking_outcome_marks_complete_or_failed_with_the_first_line(tmp_path: Path) -> None:
    from torchdoctor.core.rundir import marking_outcome

    done = new_run_dir("memory", "train.py", out=tmp_path / "ok")
    with marking_outcome(done):
        pass
    assert read_manifest(done).status == "complete"

    failed = new_run_dir("memory", "train.py", out=tmp_path / "failed")
    with pytest.raises(ValueError, match="first"), marking_outcome(failed):
        raise ValueError("first line\nsecond line")
    m = read_manifest(failed)
    assert m.status == "failed" and m.error == "first line"

    bare = new_run_dir("memory", "train.py", out=tmp_path / "bare")
    with pytest.raises(RuntimeError), marking_outcome(bare):
        raise RuntimeError
    assert read_manifest(bare).error == "RuntimeError()"
