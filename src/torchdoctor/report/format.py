"""Display strings for numbers, sizes and recipes. Formatting only: no arithmetic on results
beyond unit scaling."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

_SI: Final = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_BINARY: Final = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))
NA: Final = "n/a"


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _shown(value: float | None, render: Callable[[float], str]) -> str:
    """`render(value)`, or n/a where the value is missing or not finite: the one rule every
    number's format follows."""
    return render(value) if value is not None and math.isfinite(value) else NA


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
    return _shown(value, lambda v: f"{v:,.1f} {unit}" if v < 1e4 else f"{v:,.0f} {unit}")


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
    return _shown(fraction, lambda f: f"{f * 100:.{digits}f}%")


def pct_value(value: float | None, digits: int = 1) -> str:
    """A value already in percent."""
    return _shown(value, lambda v: f"{v:.{digits}f}%")


def speedup(value: float | None) -> str:
    return _shown(value, lambda v: f"{v:.2f}x")


def signed_percent(fraction: float | None, digits: int = 1) -> str:
    """A deviation (a fraction, +0.004) as a signed percentage: '+0.4%'."""
    return _shown(fraction, lambda f: f"{f * 100:+.{digits}f}%")


def level(confidence: float | None) -> str:
    """A confidence level (0.95) as '95%', to one decimal where it has one ('97.5%')."""
    return _shown(confidence, lambda c: f"{c * 100:.1f}".removesuffix(".0") + "%")


def interval(low: float | None, high: float | None, confidence: float | None = None) -> str:
    """'[1.38, 1.67]', or with its level '95% CI [1.38, 1.67]'."""
    if low is None or high is None or not (_finite(low) and _finite(high)):
        return NA
    span = f"[{low:.2f}, {high:.2f}]"
    return f"{level(confidence)} CI {span}" if _finite(confidence) else span


def share(value: float | None) -> str:
    """A share of a whole (a fraction 0..1) as a percentage, the one way a share is shown."""
    return percent(value)


#: Evidence keys that hold a share of a whole (a fraction 0..1), shown as percentages.
SHARE_SUFFIXES: Final = ("_share", "_fraction", "_frac")
#: Evidence keys that hold a signed relative deviation (a fraction), shown as '+0.4%'.
DEVIATION_SUFFIXES: Final = ("_deviation", "_dev")


#: Key suffixes that name a figure's unit: the suffix, and how a value in it is shown. The
#: longest first (`_bytes_per_s` before `_s`).
UNIT_SUFFIXES: Final = (
    ("_flops_per_s", flops),
    ("_bytes_per_s", bandwidth),
    ("_bytes", nbytes),
    ("_pct", pct_value),
    ("_us", micros),
    ("_ms", lambda v: seconds(None if v is None else v / 1e3)),
    ("_s", seconds),
)


def evidence_value(key: str, value: Any) -> str:
    """A record's value by what its key says it is: a share as a percentage, a deviation as a
    signed percentage, a figure with a unit in its key in that unit, anything else as a
    number."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if key.endswith(SHARE_SUFFIXES) or key == "share":
            return share(float(value))
        if key.endswith(DEVIATION_SUFFIXES):
            return signed_percent(float(value))
        for suffix, show in UNIT_SUFFIXES:
            if key.endswith(suffix):
                return show(float(value))
    return number(value)


#: The roofline's classes of an op (analyze/ops.py, `_bound`) in the roofline's own words: an
#: op under the FLOP/s roof, under the memory-bandwidth roof, too small for its dispatch, or
#: not placed (no FLOP or byte count, or no ceilings).
ROOFLINE_CLASSES: Final = {
    "compute": "bound by compute (FLOP/s roof)",
    "memory": "bound by memory bandwidth (bytes/s roof)",
    "overhead": "bound by call overhead",
    "unknown": "not placed on the roofline",
}
#: A roofline class in a table's cell: what bounds the op, in as few words.
_ROOFLINE_CELLS: Final = {
    "compute": "compute",
    "memory": "memory bandwidth",
    "overhead": "call overhead",
}


def roofline_class(bound: str | None) -> str:
    """An op's roofline class as a table shows it ('memory' -> 'memory bandwidth'); a class
    this table does not know is shown as recorded."""
    if not bound:
        return NA
    return _ROOFLINE_CELLS.get(bound, bound)


#: The endings of an evidence key that hold one roofline class's share of operator time
#: (diagnose/regime.py `{class}_bound_op_time_share`, the rules' `{class}_bound_op_share`).
_CLASS_SHARE_ENDINGS: Final = ("_bound_op_time_share", "_bound_op_share")
#: Evidence keys whose words alone would read as something else: `compute_share` is the model's
#: forward and backward as a share of the step (diagnose/rules/_common.py `compute_share`),
#: not the op time the roofline calls compute-bound.
EVIDENCE_LABELS: Final = {
    "compute_share": "model compute (forward + backward) of step time",
    "non_model_share": "outside the model (data wait, copies, other) of step time",
    "elementwise_op_time_share": "elementwise ops of op time",
}


def evidence_label(key: str) -> str:
    """A record's key as a row's label, its unit suffix dropped where the value shows the unit
    ('mean_us' -> 'mean'; 'peak_memory_bytes' -> 'peak memory'); a roofline class's share of
    op time in the roofline's words ('memory_bound_op_time_share' -> 'op time bound by memory
    bandwidth (bytes/s roof)'), so that it is not read as a share of the step."""
    if key in EVIDENCE_LABELS:
        return EVIDENCE_LABELS[key]
    for ending in _CLASS_SHARE_ENDINGS:
        bound = key.removesuffix(ending)
        if bound != key and bound in ROOFLINE_CLASSES:
            return f"op time {ROOFLINE_CLASSES[bound]}"
    for suffix, _ in UNIT_SUFFIXES:
        if key.endswith(suffix) and len(key) > len(suffix):
            return label(key.removesuffix(suffix))
    return label(key)


def trial_label(key: str) -> str:
    """A trial's id as a reader's label. An id names the recipe a trial started from and the
    recipe it measured: 'ladder:{"channels_last": true}->{"channels_last": true, "precision":
    "bf16"}' -> 'ladder: precision=bf16 on channels_last=true' (what it changed, on what);
    the final A/B's 'confirm-pairs:{}->{...}' -> 'final A/B: ... vs baseline'. An id of
    another form is shown as it is."""
    kind, sep, rest = key.partition(":")
    if not sep or not rest.startswith("{"):
        return key
    base_text, arrow, change_text = rest.partition("->")
    try:
        base = json.loads(base_text)
        changed = json.loads(change_text) if arrow else None
    except json.JSONDecodeError:
        return key
    if not isinstance(base, dict) or not (changed is None or isinstance(changed, dict)):
        return key
    if changed is None:
        return change(base) if kind == "baseline" else f"{kind}: {change(base)}"
    if kind.startswith("confirm"):
        return f"final A/B: {change(changed)} vs {change(base)}"
    delta = {k: v for k, v in changed.items() if k not in base or base[k] != v}
    return f"{kind}: {change(delta)} on {change(base)}"


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
