"""What a trace may hold, and where its events end: the reader's bounds (`decode.py`).

A trace comes from anywhere, and a 16 kB gzip can hold 16 MB of one event. `ReadLimits` caps
the decompressed bytes, one event's bytes and an event name's length, each raised by a
variable; `_Boundaries` finds where the events of the array end by following JSON's structure
over each byte once, where trying cuts by decoding is quadratic on an event full of `},`
(benchmarks/RESULTS.md, "The trace reader on crafted traces").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import numpy as np

from torchdoctor.core.errors import TraceError

#: What a trace may decompress to: the largest real trace this project has read is the 26 MB
#: A100 one (tests/data/traces), a day of a busy 8-GPU job a few GB. Raised with
#: `TORCHDOCTOR_MAX_TRACE_BYTES`.
MAX_TRACE_BYTES: Final = 8 << 30
#: One event's bytes: a Kineto event is under 2 kB (the A100 trace's largest is 1.4 kB, with
#: its input shapes); 16 MB is four orders of magnitude of room. The buffer holding a
#: half-read event never grows past it. Raised with `TORCHDOCTOR_MAX_EVENT_BYTES`.
MAX_EVENT_BYTES: Final = 16 << 20
#: One event name's characters: the longest in this project's real traces are templated CUDA
#: kernel names of about 1 kB (the H100 trace); a name is copied into every report that shows
#: the op. Raised with `TORCHDOCTOR_MAX_NAME_CHARS`.
MAX_NAME_CHARS: Final = 16 << 10


@dataclass(frozen=True)
class ReadLimits:
    """The caps on what one trace may hold (module constants; each raised by a variable)."""

    trace_bytes: int = MAX_TRACE_BYTES
    event_bytes: int = MAX_EVENT_BYTES
    name_chars: int = MAX_NAME_CHARS

    #: The environment variable that raises each cap.
    VARIABLES: ClassVar[dict[str, str]] = {
        "trace_bytes": "TORCHDOCTOR_MAX_TRACE_BYTES",
        "event_bytes": "TORCHDOCTOR_MAX_EVENT_BYTES",
        "name_chars": "TORCHDOCTOR_MAX_NAME_CHARS",
    }

    @classmethod
    def from_environment(cls) -> ReadLimits:
        values: dict[str, int] = {}
        for field, variable in cls.VARIABLES.items():
            text = os.environ.get(variable)
            if not text:
                continue
            try:
                values[field] = int(text)
            except ValueError:
                values[field] = -1
            if values[field] <= 0:
                raise TraceError(
                    f"{variable}={text!r} is not a positive whole number",
                    hint=f"write e.g. {variable}={getattr(cls, field) * 4}",
                )
        return cls(**values)


class _OverCap(Exception):
    """A trace over one of its `ReadLimits` (which, and the value seen)."""

    def __init__(self, field: str, what: str, limit: int) -> None:
        super().__init__(what)
        self.field, self.what, self.limit = field, what, limit
        self.unit = "characters" if field == "name_chars" else "bytes"


class _Capped:
    """A stream that refuses to hand out more than `limit` bytes in all."""

    def __init__(self, stream: Any, limit: int) -> None:
        self.stream, self.limit, self.read_bytes = stream, limit, 0

    def read(self, size: int) -> bytes:
        data = self.stream.read(min(size, self.limit + 1 - self.read_bytes))
        self.read_bytes += len(data)
        if self.read_bytes > self.limit:
            raise _OverCap("trace_bytes", "decompresses to more than", self.limit)
        return bytes(data)


_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_OPENS, _CLOSES = (ord("{"), ord("[")), (ord("}"), ord("]"))


class _Boundaries:
    """Where the events of the array `buf` starts with end, found by one pass over its bytes.

    JSON's structure (strings with their escapes, nesting) is followed over the bytes not
    seen yet only, and its state is kept across reads and cuts, so that each byte of the
    trace is scanned once: linear cost where trying cuts by decoding is not (an event full of
    `},` fails every try). The scan is a few numpy passes per read, whatever the bytes hold:
    a token-by-token scan in Python cost 0.17 s per MB of `{},` (benchmarks/RESULTS.md).
    `ends` holds the last two positions where an element of the array closed (nesting back
    to the array's own level).
    """

    def __init__(self) -> None:
        self.pos = 1  # after the "[" the buffer starts with
        self.depth = 1
        self.in_string = False
        self.ends: list[int] = []

    def scan(self, buf: bytearray) -> None:
        start = self.pos
        view = np.frombuffer(buf, dtype=np.uint8, count=len(buf) - start, offset=start)
        # A trailing run of backslashes waits for the next read: its length decides whether
        # the quote after it closes a string.
        plain = np.flatnonzero(view != _BACKSLASH)
        size = int(plain[-1]) + 1 if plain.size else 0
        data = view[:size]
        quotes = np.flatnonzero(data == _QUOTE)
        after_backslash = quotes[quotes > 0]
        after_backslash = after_backslash[data[after_backslash - 1] == _BACKSLASH]
        if after_backslash.size:  # escaped when an odd run of backslashes precedes it
            index = np.arange(size)
            last_plain = np.maximum.accumulate(np.where(data != _BACKSLASH, index, -1))
            run = (after_backslash - 1) - last_plain[after_backslash - 1]
            quotes = np.setdiff1d(quotes, after_backslash[run % 2 == 1], assume_unique=True)
        nesting = np.flatnonzero(np.isin(data, (*_OPENS, *_CLOSES)))
        # Outside strings: an even number of string quotes before it, counting the state the
        # previous read ended in.
        outside = (np.searchsorted(quotes, nesting) + int(self.in_string)) % 2 == 0
        nesting = nesting[outside]
        step = np.where(np.isin(data[nesting], _OPENS), 1, -1)
        depth = self.depth + np.cumsum(step)
        closed = nesting[(step < 0) & (depth == 1)]
        if closed.size:
            self.ends = [*self.ends, *(int(p) + start for p in closed[-2:])][-2:]
        if depth.size:
            self.depth = int(depth[-1])
        self.in_string = bool((int(self.in_string) + quotes.size) % 2)
        self.pos = start + size
        del view, data  # no view into `buf` may outlive the scan: the caller resizes it

    def cut(self, buf: bytearray) -> int | None:
        """The last element end followed by a `,` (the position of its last byte), if any."""
        for p in reversed(self.ends):
            if bytes(buf[p + 1 : p + 65]).lstrip().startswith(b","):
                return p
        return None

    def shift(self, removed: int) -> None:
        """`removed` bytes were cut from the front of the buffer (the "[" put back)."""
        self.pos -= removed
        self.ends = [p - removed for p in self.ends if p > removed]
