"""Keeping a database password out of everything torchdoctor writes or prints.

A study shared by several tuners lives in a database named by a URL, and a URL may carry its
password (``postgresql+psycopg://td:PASSWORD@host/db``). Run folders, reports, logs and error
messages are what people attach to bug reports, so whatever text could hold such a URL (the
command line a manifest records, an error's message) passes through `redact_secrets` before
it is written or shown. The tuner itself keeps the full URL only in memory
(`torchdoctor.tune.storage`).
"""

from __future__ import annotations

import re
from typing import Final

#: What a hidden password is shown as (SQLAlchemy's `URL.render_as_string` writes the same).
MASK: Final = "***"

#: ``scheme://user:password@`` anywhere in a text (the scheme may be missing from a mistyped
#: URL): the userinfo of RFC 3986 (section 3.2.1),
#: whose password part runs to the last ``@`` before the host. A password may itself hold
#: ``@`` or ``:`` when the user did not percent-encode it, so the match is greedy up to the
#: last ``@`` that precedes the next whitespace, quote or slash-delimited path.
_USERINFO: Final = re.compile(
    r"(?P<head>(?:[A-Za-z][A-Za-z0-9+.\-]*)?://[^\s:/@'\"]*:)(?P<password>[^\s'\"/]*)@"
)


def redact_secrets(text: str, *secrets: str) -> str:
    """`text` with the password of every URL in it, and each of `secrets`, masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return _USERINFO.sub(lambda m: f"{m['head']}{MASK}@", text)


def redact_argv(argv: list[str]) -> list[str]:
    """A command line as a record may keep it: each word through `redact_secrets`."""
    return [redact_secrets(word) for word in argv]
