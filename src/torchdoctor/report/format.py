"""Display strings for numbers, sizes and recipes. Formatting only: no arithmetic on results
beyond unit scaling."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

_SI: Final = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_BINARY: Final = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))
NA: Final = "n/a"


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def si(value: float | None, unit: str = "", digits: int = 3) -> str:
    """1.23e12 -> '1.23 T<unit>'."""
    if value is None or not _finite(value):
        return NA
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}".rstrip()


def flops(value: float | None) -> str:
    return si(value, "FLOP/s")


def bandwidth(value: float | None) -> str:
    return si(value, "B/s")


def nbytes(value: float | None) -> str:
    if value is None or not _finite(value):
        return NA
    for scale, unit in _BINARY:
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{int(value)} B"


def rate(value: float | None, unit: str = "samples/s") -> str:
    if value is None or not _finite(value):
        return NA
    return f"{value:,.1f} {unit}" if value < 1e4 else f"{value:,.0f} {unit}"


def ab_rates(best: float | None, candidate: float | None) -> str:
    """Both arms of one A/B, as measured side by side: '529.0 -> 612.3' (samples/s)."""
    if not (_finite(best) and _finite(candidate)):
        return NA
    assert best is not None and candidate is not None
    return f"{best:,.1f} \u2192 {candidate:,.1f}"


def seconds(value: float | None) -> str:
    if value is None or not _finite(value):
        return NA
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.2f} ms"
    return f"{value * 1e6:.1f} µs"


def micros(value: float | None) -> str:
    return NA if value is None else seconds(value / 1e6)


def percent(fraction: float | None, digits: int = 1) -> str:
    """A fraction (0..1) as a percentage."""
    if fraction is None or not _finite(fraction):
        return NA
    return f"{fraction * 100:.{digits}f}%"


def pct_value(value: float | None, digits: int = 1) -> str:
    """A value already in percent."""
    if value is None or not _finite(value):
        return NA
    return f"{value:.{digits}f}%"


def speedup(value: float | None) -> str:
    if value is None or not _finite(value):
        return NA
    return f"{value:.2f}x"


def interval(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return NA
    return f"[{low:.2f}, {high:.2f}]"


def number(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else NA
    if value is None:
        return NA
    if isinstance(value, list | dict):
        return json.dumps(value, default=str)
    return str(value)


def change(mapping: Mapping[str, Any]) -> str:
    """A recipe change as 'knob=value, knob=value' ('baseline' when empty)."""
    if not mapping:
        return "baseline"
    return ", ".join(f"{k}={value_text(v)}" for k, v in mapping.items())


def value_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "none" if v is None else str(v)


def label(key: str) -> str:
    """'mem_bandwidth_bytes_per_s' -> 'mem bandwidth bytes per s'."""
    return key.replace("_", " ")


#: The widest a column is held open for one word: the catalogue's longest knob=value
#: (`optimizer_impl=for_loop`, 23 characters) fits; a longer one (a hostile or free-form value)
#: folds rather than pushing an 80-column table past the screen.
WHOLE_WORD_MAX = 24


def longest_word(texts: Iterable[str], cap: int = WHOLE_WORD_MAX) -> int:
    """The longest space-separated word of `texts` (a knob=value), at most `cap`: a column at
    least this wide wraps between words, never inside one (`channels_last=T` / `rue`)."""
    return min(cap, max((len(w) for text in texts for w in text.split()), default=1))
