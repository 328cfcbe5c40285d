"""Typed reads from a record's JSON form, tolerant of absent fields.

The adapters read the versioned JSON contract of each record. A field that is absent or null
reads as None, and the page shows "n/a" rather than failing: a report is most needed when a
run went wrong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

JsonDict = dict[str, Any]


def get(data: Mapping[str, Any] | None, *names: str) -> Any:
    """The first of `names` present (not None) in `data`."""
    if not data:
        return None
    for name in names:
        value = data.get(name)
        if value is not None:
            return value
    return None


def num(data: Mapping[str, Any] | None, *names: str) -> float | None:
    value = get(data, *names)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def integer(data: Mapping[str, Any] | None, *names: str) -> int | None:
    value = get(data, *names)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def text(data: Mapping[str, Any] | None, *names: str) -> str | None:
    value = get(data, *names)
    return None if value is None else str(value)


def mapping(data: Mapping[str, Any] | None, *names: str) -> JsonDict:
    value = get(data, *names)
    return dict(value) if isinstance(value, Mapping) else {}


def items(data: Mapping[str, Any] | None, *names: str) -> list[Any]:
    value = get(data, *names)
    return list(value) if isinstance(value, list) else []


def floats(values: Mapping[str, Any]) -> dict[str, float]:
    """The numeric entries of a mapping, as floats."""
    return {
        str(k): float(v)
        for k, v in values.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


def pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, list | tuple) and len(value) == 2:
        low, high = value
        if isinstance(low, int | float) and isinstance(high, int | float):
            return float(low), float(high)
    return None


def scalars(data: Mapping[str, Any], skip: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    """The scalar fields of a record (its facts), in record order, minus the schema header."""
    return [
        (k, v)
        for k, v in data.items()
        if k not in ("schema", "version", *skip) and not isinstance(v, dict | list) and v != ""
    ]
