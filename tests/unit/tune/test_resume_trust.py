"""A received run folder is data: `tune --resume` runs and opens only what the caller gives.

Each test crafts a run folder as someone else could send it (a script command, a workload
file, a session factory, a database server) and checks that resuming it without that thing
given again runs nothing, imports nothing, connects nowhere, and says so in one line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from cli_output import one_error_line
from fake_pg import CleartextServer
from torchdoctor.cli.main import main
from torchdoctor.core.errors import TuneError
from torchdoctor.core.rundir import new_run_dir, release_run_dir
from torchdoctor.tune import StorageURL, TuneConfig, tune
from torchdoctor.tune.study import Study

PASSWORD = "hunter2"


def _payload(marker: Path) -> str:
    """Python source that leaves `marker` behind when it runs (or is imported)."""
    return f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"


def _received_folder(tmp_path: Path, **fields: object) -> Path:
    """A tune run folder as another machine wrote it, its config holding `fields`."""
    run = new_run_dir("tune", "x", out=tmp_path / "received")
    TuneConfig(**{"workload": "mlp", **fields}).write(run / "tune_config.json")  # type: ignore[arg-type]
    release_run_dir(run)  # written elsewhere: nothing here holds it
    return run


def _files(run: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_a_folders_script_command_is_never_run_on_its_word(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "payload.py").write_text(_payload(marker))
    run = _received_folder(
        tmp_path, workload="script:payload", command=["payload.py"], cwd=str(tmp_path)
    )
    before = _files(run)
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--resume", str(run)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "payload.py" in line and "give it again" in line
    # Another command than the folder's is refused too, before anything runs.
    (tmp_path / "train.py").write_text(_payload(marker))
    assert main(["tune", "--resume", str(run), "--", "python", "train.py"]) == 2
    assert "not 'train.py'" in one_error_line(capsys.readouterr().err)
    assert not marker.exists() and _files(run) == before


def test_the_folders_own_command_runs_only_in_the_folder_it_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "train.py").write_text(_payload(marker))
    run = _received_folder(
        tmp_path, workload="script:train", command=["train.py"], cwd=str(elsewhere)
    )
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--resume", str(run), "--", "python", "train.py"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"in {elsewhere}, not in {tmp_path}" in line
    assert not marker.exists()


def test_a_folders_workload_file_is_never_imported_on_its_word(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.py"
    evil.write_text(_payload(marker) + "def make(**kw):\n    return None\n")
    run = _received_folder(tmp_path, workload=f"{evil}:make")
    assert main(["tune", "--resume", str(run)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "workload file" in line and "name it again" in line
    with pytest.raises(TuneError, match="workload file"):
        tune(resume=run)
    assert not marker.exists()


def test_a_folders_factory_and_its_options_are_never_taken_from_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "td_received_factory.py").write_text(_payload(marker))
    monkeypatch.syspath_prepend(str(tmp_path))
    run = _received_folder(tmp_path, factory="td_received_factory:make")
    assert main(["tune", "--resume", str(run)]) == 2
    assert "factory 'td_received_factory:make'" in one_error_line(capsys.readouterr().err)
    with pytest.raises(TuneError, match="does not import"):
        tune(resume=run)
    # The caller's own config names the factory; options that differ from the folder's are
    # refused as well (the folder's are never used).
    theirs = _received_folder(
        tmp_path / "b", factory="td_received_factory:make", factory_options={"cmd": "rm -rf ~"}
    )
    mine = TuneConfig(workload="mlp", factory="td_received_factory:make")
    with pytest.raises(TuneError, match="other options"):
        tune(resume=theirs, config=mine)
    assert not marker.exists() and "td_received_factory" not in sys.modules


def test_a_folders_database_is_never_opened_on_its_word(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    with CleartextServer() as server:
        run = _received_folder(
            tmp_path, storage=f"postgresql+psycopg://td@127.0.0.1:{server.port}/studies"
        )
        assert main(["tune", "--resume", str(run)]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "give it again: --storage" in line and PASSWORD not in line
        with pytest.raises(TuneError, match="give it again"):
            tune(resume=run)
        # Another storage than the folder's is refused as well.
        other = StorageURL.parse("postgresql+psycopg://td@127.0.0.1:1/other")
        with pytest.raises(TuneError, match="is not the study's storage"):
            tune(resume=run, storage=other)
    assert server.connections == 0


def test_a_server_that_asks_for_the_password_in_clear_never_gets_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("psycopg", reason="the PostgreSQL driver is in the dev extra")
    with CleartextServer() as server:
        url = f"postgresql+psycopg://td:{PASSWORD}@127.0.0.1:{server.port}/studies"
        with pytest.raises(TuneError) as raised:
            Study(StorageURL.parse(url), shared=True)
        assert main(["tune", "mlp", "--no-diagnose", "--storage", url]) == 2
    assert server.connections >= 2  # each reached the server, which asked in clear
    assert all(PASSWORD.encode() not in data for data in server.received), server.received
    assert PASSWORD not in str(raised.value) and "cleartext" in str(raised.value)
    err = capsys.readouterr().err
    assert PASSWORD not in err


def test_no_cleartext_refusal_without_a_libpq_that_can(monkeypatch: pytest.MonkeyPatch) -> None:
    import torchdoctor.tune.storage as storage

    url = StorageURL.parse("postgresql+psycopg://td@db/studies")
    assert url.engine_kwargs() == {"connect_args": {"require_auth": "!password"}}
    monkeypatch.setattr(storage, "libpq_version", lambda: 150004)
    assert url.engine_kwargs() == {}
    note = storage.cleartext_note(url)
    assert note is not None and "libpq 15" in note
    assert StorageURL.parse("sqlite:///x.db").engine_kwargs() == {}


def test_resuming_is_checked_before_the_folder_is_touched(tmp_path: Path) -> None:
    run = _received_folder(tmp_path, command=["train.py"], cwd=str(tmp_path))
    before = _files(run)
    with pytest.raises(TuneError):
        tune(resume=run)
    assert _files(run) == before and sorted(os.listdir(run)) == ["run.json", "tune_config.json"]


def test_a_scripts_own_secret_stays_out_of_the_folder_and_its_resume_still_matches(
    tmp_path: Path,
) -> None:
    from torchdoctor.tune.resume import open_resume

    command = ["train.py", "--db", f"postgresql://td:{PASSWORD}@db.internal/runs"]
    run = _received_folder(
        tmp_path, workload="script:train", command=command, cwd=str(tmp_path)
    )
    assert PASSWORD not in (run / "tune_config.json").read_text()
    given = TuneConfig(workload="script:train", command=command, cwd=str(tmp_path))
    resumed = open_resume(run, None, given=given)
    # The command that runs is the one given again, secret and all; the folder's masked copy
    # only keys the study.
    assert resumed.command == command
    # Another password is the same study (a rotated secret); another database is not.
    rotated = ["train.py", "--db", "postgresql://td:rotated@db.internal/runs"]
    assert open_resume(run, None, given=given.model_copy(update={"command": rotated})).command
    other = ["train.py", "--db", f"postgresql://td:{PASSWORD}@elsewhere/runs"]
    with pytest.raises(TuneError, match=r"not 'train\.py --db ") as refused:
        open_resume(run, None, given=given.model_copy(update={"command": other}))
    assert PASSWORD not in str(refused.value)
