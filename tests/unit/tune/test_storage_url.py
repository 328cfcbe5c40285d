"""A storage URL: parsed once, its password kept in memory, its public form recorded."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from cli_output import one_error_line
from torchdoctor.cli.main import main
from torchdoctor.core.errors import TuneError, UsageError
from torchdoctor.tune import TuneConfig
from torchdoctor.tune.storage import StorageURL
from torchdoctor.tune.study import Study

PASSWORD = "p@ss:word"
URL = "postgresql+psycopg://td:p%40ss%3Aword@db.example.org:5432/studies?sslmode=require"
PUBLIC = "postgresql+psycopg://td@db.example.org:5432/studies?sslmode=require"


def test_the_public_form_drops_the_password_and_keeps_the_rest() -> None:
    url = StorageURL.parse(URL)
    assert url.public == PUBLIC and url.secret == URL and url.password == PASSWORD
    assert PASSWORD not in f"{url} {url!r}" and "p%40ss" not in f"{url} {url!r}"
    # the public form is a working URL in its own right (libpq then reads PGPASSWORD)
    assert StorageURL.parse(url.public).public == PUBLIC
    assert StorageURL.parse("sqlite:///runs/study.db").public == "sqlite:///runs/study.db"


def test_a_plain_postgresql_url_means_psycopg_3_where_psycopg2_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torchdoctor.tune.storage as storage

    monkeypatch.setattr(storage, "_driver", lambda: "psycopg")
    url = StorageURL.parse("postgresql://td:hunter2@db/studies")
    assert url.public == "postgresql+psycopg://td@db/studies"
    assert url.secret == "postgresql+psycopg://td:hunter2@db/studies"
    monkeypatch.setattr(storage, "_driver", lambda: "psycopg2")
    assert StorageURL.parse("postgresql://td@db/studies").public == "postgresql://td@db/studies"


def test_a_driver_message_is_redacted_of_the_decoded_password() -> None:
    url = StorageURL.parse(URL)
    assert PASSWORD not in url.redact(f'password "{PASSWORD}" was refused')


@pytest.mark.parametrize(
    "text",
    ["not a url", "postgresql+psycopg://td:hunter2@db:port/studies", "://td:hunter2@db/x"],
)
def test_a_url_that_does_not_parse_is_a_usage_error_without_the_password(text: str) -> None:
    with pytest.raises(UsageError) as raised:
        StorageURL.parse(text)
    assert "hunter2" not in str(raised.value)


def test_a_config_never_holds_the_password(tmp_path: Path) -> None:
    config = TuneConfig(workload="mlp", storage=URL)
    assert config.storage == PUBLIC
    config.write(tmp_path / "tune_config.json")
    assert "p%40ss" not in (tmp_path / "tune_config.json").read_text()
    assert TuneConfig.read(tmp_path / "tune_config.json").storage == PUBLIC


def test_the_cli_rejects_an_unreadable_url_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    bad = "postgresql+psycopg://td:hunter2@db:port/studies"
    assert main(["--json", "tune", "mlp", "--no-diagnose", "--storage", bad]) == 2
    out, err = capsys.readouterr()
    line = one_error_line(err)
    assert out == "" and "hunter2" not in line and "cannot read the storage URL" in line


def test_a_database_that_refuses_is_one_error_naming_the_public_url() -> None:
    pytest.importorskip("psycopg", reason="the PostgreSQL driver is in the dev extra")
    with socket.socket() as s:  # a loopback port nobody listens on: refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql+psycopg://td:hunter2@127.0.0.1:{port}/studies"
    with pytest.raises(TuneError) as raised:
        Study(url, shared=True)
    message = str(raised.value)
    assert "hunter2" not in message and f"td@127.0.0.1:{port}/studies" in message


#: A password in each place a URL can hold one, none of it percent-encoded.
FORMS = [
    "postgresql+psycopg://td:pa/ss@127.0.0.1:{port}/studies",
    "postgresql+psycopg://td@127.0.0.1:{port}/studies?password=pa/ss",
    "postgresql+psycopg://td@127.0.0.1:{port}/studies?sslmode=disable&sslpassword=pa/ss",
]


def _closed_port() -> int:
    with socket.socket() as s:  # a loopback port nobody listens on: refused at once
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("form", FORMS)
def test_no_url_form_leaves_its_password_in_the_public_form_or_a_config(
    form: str, tmp_path: Path
) -> None:
    url = StorageURL.parse(form.format(port=5432))
    assert url.carries_password and "pa/ss" not in f"{url.public} {url} {url!r}"
    assert url.public.startswith("postgresql+psycopg://td@127.0.0.1:5432/studies")
    config = TuneConfig(workload="mlp", storage=form.format(port=5432))
    config.write(tmp_path / "tune_config.json")
    assert "pa/ss" not in (tmp_path / "tune_config.json").read_text()


@pytest.mark.parametrize("form", FORMS)
def test_no_printed_line_holds_the_password_and_the_argv_one_is_warned_of(
    form: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("psycopg", reason="the PostgreSQL driver is in the dev extra")
    url = form.format(port=_closed_port())
    out_dir = tmp_path / "run"
    code = main(["tune", "mlp", "--no-diagnose", "--out", str(out_dir), "--storage", url])
    out, err = capsys.readouterr()
    assert code == 2 and "pa/ss" not in out + err
    warning, error = [line for line in err.splitlines() if line.strip()]
    assert warning.startswith("warning: the --storage URL carries a password")
    assert "PGPASSWORD" in warning and "cannot open the study storage" in error
    assert not out_dir.exists()


def test_children_inherit_neither_the_password_nor_the_url(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import subprocess
    import sys

    from torchdoctor.collect.launcher import child_command
    from torchdoctor.tune.resume import secrets_held

    monkeypatch.setenv("PGPASSWORD", "pa/ss")
    monkeypatch.setenv("PGSSLPASSWORD", "key-pass")
    given = StorageURL.parse("postgresql+psycopg://td@db/studies")
    with secrets_held(given) as held:
        assert held is not None and held.password == "pa/ss" and "pa%2Fss" in held.secret
        assert held.public == given.public
        # What a trial's script (collect/launcher.py) and a spawned worker start with.
        cmd, env = child_command(tmp_path / "c.json", ["train.py"], env=None)
        child = subprocess.run(
            [sys.executable, "-c", "import os, sys; print(sorted(os.environ), sys.argv)"],
            capture_output=True,
            text=True,
            check=True,
        )
    for text in (" ".join(cmd), repr(env), child.stdout):
        assert "pa/ss" not in text and "key-pass" not in text
        assert "PGPASSWORD" not in text and "PGSSLPASSWORD" not in text
    # Given back once the study is done: the caller's environment is theirs.
    assert os.environ["PGPASSWORD"] == "pa/ss" and os.environ["PGSSLPASSWORD"] == "key-pass"


def test_a_url_with_its_own_password_keeps_it_and_the_variable_still_goes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torchdoctor.tune.resume import secrets_held

    monkeypatch.setenv("PGPASSWORD", "from-env")
    with secrets_held(StorageURL.parse("postgresql+psycopg://td:own@db/s")) as held:
        assert held is not None and held.password == "own" and "PGPASSWORD" not in os.environ
    with secrets_held(StorageURL.parse("sqlite:///s.db")) as held:
        assert "PGPASSWORD" in os.environ  # a file needs no password: nothing changes
