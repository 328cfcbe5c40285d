"""A study's storage URL: the full one in memory, a password-free one everywhere else.

`tune --storage postgresql+psycopg://td:PASSWORD@host/db` must open the database with the
password, yet nothing it writes (tune_config.json, run.json, the reports, `--json`) or prints
(an error, a log line) may hold it. So a `StorageURL` keeps the URL as given (`secret`, used
only to open the storage) and its `public` form without the password, which is what a study
records: ``postgresql+psycopg://td@host/db``. The public form is itself a working URL: libpq
(and so psycopg) takes a missing password from ``PGPASSWORD`` or ``~/.pgpass``, which is how
a resumed study reconnects, and how a team is best served to begin with (README, "A study
shared by several tuners").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchdoctor.core.errors import UsageError
from torchdoctor.core.redact import redact_secrets


def _parse(text: str) -> Any:
    """SQLAlchemy's URL of `text` (the parser Optuna's storage itself uses)."""
    import sqlalchemy.exc
    from sqlalchemy.engine import make_url

    try:
        return make_url(text)
    except (sqlalchemy.exc.ArgumentError, ValueError):
        raise UsageError(
            f"cannot read the storage URL {redact_secrets(text)!r}",
            hint="write dialect[+driver]://user@host[:port]/database, e.g. "
            "postgresql+psycopg://td@db.example.org/studies, or sqlite:///study.db",
        ) from None


def _driver() -> str | None:
    """The PostgreSQL driver a plain postgresql:// URL gets: psycopg2 (SQLAlchemy's default)
    when installed, else psycopg 3 when installed."""
    from importlib.util import find_spec

    for name in ("psycopg2", "psycopg"):
        if find_spec(name) is not None:
            return name
    return None


@dataclass(frozen=True)
class StorageURL:
    """A parsed storage URL. `repr` and `str` show the public form only."""

    secret: str = field(repr=False)
    public: str
    password: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, text: str) -> StorageURL:
        url = _parse(text)
        if url.drivername == "postgresql" and _driver() == "psycopg":
            # SQLAlchemy's default PostgreSQL driver is psycopg2; where only psycopg 3 is
            # installed (the `postgres` extra), a plain postgresql:// URL means it.
            url = url.set(drivername="postgresql+psycopg")
            text = url.render_as_string(hide_password=False)
        password = url.password
        # `URL.set(password=None)` keeps the password (None means "unchanged" there).
        bare = url.create(
            url.drivername,
            username=url.username,
            host=url.host,
            port=url.port,
            database=url.database,
            query=url.query,
        )
        public = bare.render_as_string(hide_password=False)
        return cls(secret=text, public=public, password=str(password) if password else None)

    @property
    def is_sqlite(self) -> bool:
        return self.public.startswith("sqlite")

    def redact(self, text: str) -> str:
        """`text` with this URL's password masked (an error message from the driver)."""
        return redact_secrets(text, *([self.password] if self.password else []))

    def __str__(self) -> str:
        return self.public


def public_url(text: str | None) -> str | None:
    """`text` without its password, for a record (None stays None)."""
    return None if text is None else StorageURL.parse(text).public
