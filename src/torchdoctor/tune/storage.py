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

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final

from torchdoctor.core.errors import UsageError
from torchdoctor.core.redact import SECRET_ENV, is_secret_key, redact_secrets

#: What every PostgreSQL connection of a study asks of libpq: never send the password in
#: clear. A server (or whatever answers at its address) that asks for cleartext password
#: authentication is refused before the password leaves; SCRAM, md5, GSSAPI, certificates
#: and trust still work. libpq's `require_auth` connection parameter (PostgreSQL 16 docs,
#: "Parameter Key Words": "!password" disallows the cleartext exchange).
REQUIRE_AUTH: Final = "!password"
#: The first libpq release with `require_auth` (PostgreSQL 16), as libpq numbers versions.
REQUIRE_AUTH_LIBPQ: Final = 160000


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
        secret_query = {k: v for k, v in url.query.items() if is_secret_key(k)}
        if password is None and secret_query:
            # ?password=... is libpq's too: the one password this URL opens with.
            first = next(iter(secret_query.values()))
            password = first if isinstance(first, str) else (first[0] if first else None)
        # `URL.set(password=None)` keeps the password (None means "unchanged" there).
        bare = url.create(
            url.drivername,
            username=url.username,
            host=url.host,
            port=url.port,
            database=url.database,
            query={k: v for k, v in url.query.items() if k not in secret_query},
        )
        public = bare.render_as_string(hide_password=False)
        return cls(secret=text, public=public, password=str(password) if password else None)

    @property
    def carries_password(self) -> bool:
        """Whether the URL as given holds a password (in its userinfo or its query)."""
        return self.password is not None

    def with_environment_password(self, environ: MutableMapping[str, str]) -> StorageURL:
        """This URL with libpq's ``PGPASSWORD`` taken out of `environ` into memory.

        A URL without a password gets it from the environment, as libpq would; the variable
        is then removed, so that no process the tuner starts (a trial's worker, a user's
        script) inherits it. A URL with its own password keeps it; the variable still goes.
        """
        if self.is_sqlite:
            return self
        given = {name: environ.pop(name) for name in SECRET_ENV if name in environ}
        password = given.get("PGPASSWORD")
        if self.password is not None or not password:
            return self
        url = _parse(self.secret).set(password=password)
        return StorageURL(
            secret=url.render_as_string(hide_password=False),
            public=self.public,
            password=password,
        )

    def engine_kwargs(self) -> dict[str, Any]:
        """SQLAlchemy engine arguments that open this storage: for PostgreSQL, libpq told to
        refuse cleartext password authentication (`REQUIRE_AUTH`) where it can."""
        if not self.public.startswith("postgresql") or libpq_version() < REQUIRE_AUTH_LIBPQ:
            return {}
        return {"connect_args": {"require_auth": REQUIRE_AUTH}}

    @property
    def is_sqlite(self) -> bool:
        return self.public.startswith("sqlite")

    def redact(self, text: str) -> str:
        """`text` with this URL's password masked (an error message from the driver)."""
        return redact_secrets(text, *([self.password] if self.password else []))

    def __str__(self) -> str:
        return self.public


def libpq_version() -> int:
    """The libpq the installed PostgreSQL driver runs on (e.g. 180006), 0 where none is."""
    try:
        import psycopg

        return int(psycopg.pq.version())
    except ImportError:
        pass
    try:
        import psycopg2.extensions  # type: ignore[import-not-found,import-untyped,unused-ignore]

        return int(psycopg2.extensions.libpq_version())
    except ImportError:
        return 0


def cleartext_note(url: StorageURL) -> str | None:
    """A note where this URL's connections cannot refuse a cleartext password exchange."""
    if not url.public.startswith("postgresql"):
        return None
    version = libpq_version()
    if version >= REQUIRE_AUTH_LIBPQ:
        return None
    return (
        f"libpq {version // 10000 or 'unknown'} cannot refuse a server that asks for the "
        "password in clear (require_auth needs libpq 16): connect only to a server you trust, "
        "or install psycopg[binary] 3.1.12 or later"
    )


def public_url(text: str | None) -> str | None:
    """`text` without its password, for a record (None stays None)."""
    return None if text is None else StorageURL.parse(text).public
