"""A database password never reaches a record: `redact_secrets` and the run manifest."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from torchdoctor.core.redact import MASK, redact_argv, redact_secrets
from torchdoctor.core.rundir import finish_run_dir, new_run_dir

PASSWORD = "s3cr:et@pw"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgresql+psycopg://td:pw@db:5432/s", f"postgresql+psycopg://td:{MASK}@db:5432/s"),
        ("--storage=mysql://u:pw@h/d", f"--storage=mysql://u:{MASK}@h/d"),
        # an unencoded @ or : in the password: masked up to the host's @
        (f"postgresql://td:{PASSWORD}@h/d", f"postgresql://td:{MASK}@h/d"),
        (
            "error at 'postgresql://td:pw@h/d': refused",
            f"error at 'postgresql://td:{MASK}@h/d': refused",
        ),
        # no password: nothing to mask
        ("postgresql+psycopg://td@db:5432/s", "postgresql+psycopg://td@db:5432/s"),
        ("sqlite:////tmp/a:b@c/study.db", "sqlite:////tmp/a:b@c/study.db"),
        ("https://example.org:8080/x", "https://example.org:8080/x"),
    ],
)
def test_a_urls_password_is_masked(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


def test_a_named_secret_is_masked_wherever_it_appears() -> None:
    # a driver's message may quote the password without its URL
    assert redact_secrets(f"auth failed for {PASSWORD!r}", PASSWORD) == f"auth failed for '{MASK}'"
    assert redact_argv(["tune", f"postgresql://td:{PASSWORD}@h/d"]) == [
        "tune",
        f"postgresql://td:{MASK}@h/d",
    ]


def test_the_manifest_records_the_command_line_without_the_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"postgresql+psycopg://td:{PASSWORD}@db/s"
    monkeypatch.setattr(sys, "argv", ["torchdoctor", "tune", "mlp", "--storage", url])
    run = new_run_dir("tune", "mlp", out=tmp_path / "run")
    finish_run_dir(run, error=f"OperationalError: cannot reach {url}")
    text = (run / "run.json").read_text()
    assert PASSWORD not in text
    manifest = json.loads(text)
    assert manifest["command"][-1] == f"postgresql+psycopg://td:{MASK}@db/s"
    assert (
        manifest["error"] == f"OperationalError: cannot reach postgresql+psycopg://td:{MASK}@db/s"
    )


#: Every form a password takes in a URL, each with a password no pattern of the old kind saw.
URL_FORMS = [
    "postgresql+psycopg://td:pa/ss@db/s",  # an unencoded "/"
    "postgresql://td:pa?ss@db/s",  # an unencoded "?"
    "postgresql://td:a@b:c/d@db:5432/s",  # "@", ":" and "/" together
    "postgresql+psycopg://td@db/s?password=pa/ss",  # libpq's query parameter
    "postgresql+psycopg://td@db/s?sslmode=require&sslpassword=pa/ss",  # the client key's
    "postgresql://td@db/s?PASSWORD=pa%2Fss",  # any case, percent-encoded
]


@pytest.mark.parametrize("url", URL_FORMS)
def test_every_url_form_loses_its_password(url: str) -> None:
    for text in (url, f"cannot open '{url}': refused", f"--storage={url}"):
        shown = redact_secrets(text)
        assert "pa/ss" not in shown and "pa?ss" not in shown and "pa%2Fss" not in shown
        assert "c/d" not in shown and MASK in shown


def test_a_libpq_connection_string_loses_its_password() -> None:
    shown = redact_secrets("host=db password=hunter2 dbname=s sslpassword='a b'")
    assert "hunter2" not in shown and "a b" not in shown
    assert shown.startswith("host=db ") and "dbname=s" in shown


@pytest.mark.parametrize("url", URL_FORMS)
def test_the_manifest_never_holds_a_password_of_any_url_form(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["torchdoctor", "tune", "mlp", "--storage", url])
    run = new_run_dir("tune", "mlp", out=tmp_path / "run")
    finish_run_dir(run, error=f"OperationalError: cannot reach {url}")
    text = (run / "run.json").read_text()
    assert "pa/ss" not in text and "pa?ss" not in text and "pa%2Fss" not in text
