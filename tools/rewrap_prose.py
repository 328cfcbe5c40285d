"""Carry the words of a comment or docstring line past the line length onto the next line.

    python tools/rewrap_prose.py FILE.py ...

Used by `tools/rename_by_role.sh` after a longer module name pushes a line of prose past
`[tool.ruff] line-length`: the words past it go to the start of the next line of the same
paragraph (the same comment prefix, or the same docstring at the same indentation, not a list
item), else onto a new line under it; repeated until no prose line is too long. Code lines
are `ruff format`'s; a single word longer than the line is left for a person.
"""

from __future__ import annotations

import io
import re
import sys
import tokenize

#: `[tool.ruff] line-length` in pyproject.toml.
LIMIT = 100
_BEFORE_DOCSTRING = (
    tokenize.NEWLINE,
    tokenize.NL,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
)
_TRIPLE = ('"' * 3, "'" * 3)
_LIST_ITEM = re.compile(r"([-*]|\d+[.)]) ")


def prose_lines(text: str) -> tuple[set[int], dict[int, int]]:
    """The line numbers of whole-line comments, and of docstring lines (-> the docstring's
    first line, which tells one docstring from the next)."""
    comments: set[int] = set()
    docs: dict[int, int] = {}
    toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    lines = text.splitlines()
    for i, tok in enumerate(toks):
        if tok.type == tokenize.COMMENT and lines[tok.start[0] - 1].lstrip().startswith("#"):
            comments.add(tok.start[0])
        elif tok.type == tokenize.STRING and tok.string.lstrip("rRuU").startswith(_TRIPLE):
            before = toks[i - 1].type if i else tokenize.ENCODING
            after = toks[i + 1].type if i + 1 < len(toks) else tokenize.ENDMARKER
            if before in _BEFORE_DOCSTRING and after in (tokenize.NEWLINE, tokenize.ENDMARKER):
                for n in range(tok.start[0], tok.end[0] + 1):
                    docs[n] = tok.start[0]
    return comments, docs


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def rewrap_once(text: str) -> str | None:
    """`text` with its first too-long prose line carried over; None when none is left (or
    the first one cannot be cut)."""
    comments, docs = prose_lines(text)
    lines = text.split("\n")
    long = [n for n in sorted(comments | set(docs)) if len(lines[n - 1]) > LIMIT]
    if not long:
        return None
    n = long[0]
    line = lines[n - 1]
    match = re.match(r"\s*#:?\s?", line) if n in comments else None
    prefix = match.group(0) if match else _indent(line)
    cut = line.rfind(" ", len(prefix) + 1, LIMIT + 1)
    if cut < 0:
        return None
    head, tail = line[:cut].rstrip(), line[cut + 1 :]
    nxt = lines[n] if n < len(lines) else ""
    rest = nxt[len(prefix) :]
    if n in comments:
        joins = n + 1 in comments and nxt.startswith(prefix) and bool(rest.strip())
        joins = joins and not rest.startswith(" ")
    else:
        joins = (
            docs.get(n + 1) == docs[n]
            and _indent(nxt) == prefix
            and bool(nxt.strip())
            and not nxt.strip().startswith(_TRIPLE)
            and not _LIST_ITEM.match(nxt.strip())
        )
    if joins:
        lines[n - 1 : n + 1] = [head, prefix + tail + " " + rest]
    else:
        lines[n - 1 : n] = [head, prefix + tail]
    return "\n".join(lines)


def rewrap(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    changed = False
    for _ in range(1000):
        new = rewrap_once(text)
        if new is None:
            break
        text, changed = new, True
    if changed:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        rewrap(name)
