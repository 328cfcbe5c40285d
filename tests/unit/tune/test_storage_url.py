"""A storage URL: parsed once, its password kept in memory, its public form recorded."""

from __future__ import annotations

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
