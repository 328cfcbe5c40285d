"""Option parsing shared by several commands."""

from __future__ import annotations

from typing import Any

from torchdoctor.core.errors import UsageError


def parse_workload_params(items: list[str]) -> dict[str, Any]:
    """`--param name=value` -> {name: value}, the value an int, else a float, else a str."""
    params: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"cannot read workload parameter {item!r}", hint="write name=value")
        value: Any = text
        for convert in (int, float):
            try:
                value = convert(text)
                break
            except ValueError:
                continue
        params[name.strip()] = value
    return params
