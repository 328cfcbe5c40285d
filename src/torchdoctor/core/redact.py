"""Keeping a database password out of everything torchdoctor writes or prints.

A study shared by several tuners lives in a database named by a URL, and a URL may carry its
password in two places: its userinfo (``postgresql+psycopg://td:PASSWORD@host/db``, where an
unencoded password may hold ``/``, ``@`` or ``?``) and its query
(``...?password=PASSWORD``, libpq's ``sslpassword=``). Run folders, reports, logs and error
messages are what people attach to bug reports, so whatever text could hold such a URL (the
command line a manifest records, an error's message) passes through `redact_secrets` before
it is written or shown. A regex only finds where a URL starts; each URL found is then taken
apart (`redact_url`) and put back with its secrets masked. The tuner itself keeps the full URL
only in memory (`torchdoctor.tune.storage`), and its children never inherit libpq's password
variables (`without_secrets`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

#: What a hidden password is shown as (SQLAlchemy's `URL.render_as_string` writes the same).
MASK: Final = "***"

#: Where a URL starts in a text, up to the next whitespace or quote: ``scheme://...`` (the
#: scheme may be missing from a mistyped URL). Only the start is found by pattern; the URL's
#: parts are read by `redact_url`.
_URL: Final = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.\-]*)?://[^\s'\"]*")

#: Query parameters (and libpq ``key=value`` connection settings) whose value is a secret:
#: libpq's ``password`` and ``sslpassword`` (PostgreSQL docs, "Parameter Key Words"), and the
#: spellings other drivers use for the same.
SECRET_KEYS: Final = frozenset(
    {"password", "passwd", "pwd", "pass", "sslpassword", "secret", "token", "access_token"}
)

#: ``password=VALUE`` in a libpq connection string ("host=db password=... dbname=x") or a
#: driver's message quoting one.
_KEY_VALUE: Final = re.compile(
    r"(?P<key>\b(?:" + "|".join(sorted(SECRET_KEYS, key=len, reverse=True)) + r"))\s*=\s*"
    r"(?P<value>'(?:[^'\\]|\\.)*'|[^\s&'\"]+)",
    re.IGNORECASE,
)

#: libpq's environment variables that hold a secret itself (not a path to one): what a child
#: process of the tuner must not inherit (PostgreSQL docs, "Environment Variables").
SECRET_ENV: Final = ("PGPASSWORD", "PGSSLPASSWORD")


def is_secret_key(key: str) -> bool:
    """Whether a URL query parameter or connection setting named `key` holds a secret."""
    return key.strip().lower() in SECRET_KEYS


def _redact_query(query: str) -> str:
    """`query` (``a=1&password=x``) with each secret parameter's value masked, the rest as is."""
    parts = []
    for item in query.split("&"):
        key, sep, _ = item.partition("=")
        parts.append(f"{key}={MASK}" if sep and is_secret_key(_unquote(key)) else item)
    return "&".join(parts)


def _unquote(text: str) -> str:
    from urllib.parse import unquote_plus

    return unquote_plus(text)


def redact_url(url: str) -> str:
    """`url` with its userinfo password and its secret query parameters masked.

    The authority ends at the last ``@`` of the URL: a password the user did not
    percent-encode may hold ``/``, ``?``, ``:`` or ``@``, and masking too much of a URL that
    only looked like it had one is harmless where masking too little is not.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    at = rest.rfind("@")
    if at >= 0:
        userinfo, rest = rest[:at], rest[at + 1 :]
        user, colon, _ = userinfo.partition(":")
        if "/" in user or "?" in user:
            # An ``@`` in a path or query ("sqlite:////tmp/a:b@c/db"), not a userinfo: a
            # user name holds neither.
            rest = f"{userinfo}@{rest}"
            userinfo = ""
        elif colon:
            userinfo = f"{user}:{MASK}"
        head = f"{scheme}://{userinfo}@" if userinfo else f"{scheme}://"
    else:
        head = f"{scheme}://"
    path, q, query = rest.partition("?")
    if q:
        query, h, fragment = query.partition("#")
        rest = f"{path}?{_redact_query(query)}{h}{fragment}"
    return head + rest


def redact_secrets(text: str, *secrets: str) -> str:
    """`text` with the password of every URL in it, every ``password=...`` setting, and each
    of `secrets`, masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    return _KEY_VALUE.sub(lambda m: f"{m['key']}={MASK}", text)


def redact_argv(argv: list[str]) -> list[str]:
    """A command line as a record may keep it: each word through `redact_secrets`."""
    return [redact_secrets(word) for word in argv]


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without libpq's secret variables (`SECRET_ENV`): what a child may inherit."""
    return {k: v for k, v in env.items() if k not in SECRET_ENV}
