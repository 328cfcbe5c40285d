"""A recipe's DataLoader keyword knobs, read from the catalogue: which knobs are keywords of
the DataLoader, in the order they are set, and the keywords for a recipe's settings.

Apart from `knobs/dataloading.py`, which declares the knobs, because this walks the catalogue
that imports the declarations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchdoctor.knobs.base import KnobValue
from torchdoctor.knobs.catalogue import catalogue
from torchdoctor.knobs.dataloading import NUM_WORKERS
from torchdoctor.knobs.parts import LoaderArgument


def loader_arguments() -> list[tuple[str, LoaderArgument]]:
    """The catalogue's DataLoader keyword knobs (name, part), in the order they are set."""
    found = [
        (k.name, k.applies_to) for k in catalogue() if isinstance(k.applies_to, LoaderArgument)
    ]
    return sorted(found, key=lambda item: item[1].order)


def loader_kwargs(settings: Mapping[str, KnobValue], default_workers: int) -> dict[str, Any]:
    """DataLoader keyword arguments for a recipe's resolved data-loading settings.

    An unset knob takes its part's fallback (num_workers: `default_workers`, the workload's);
    a knob that needs worker processes is left out without them.
    """
    kwargs: dict[str, Any] = {}
    workers = 0
    for name, part in loader_arguments():
        if not part.engine:
            continue
        value = settings.get(name)
        if value is None:
            value = default_workers if name == NUM_WORKERS.name else part.fallback
        if part.needs_workers and workers <= 0:
            continue
        kwargs[part.keyword] = value
        if name == NUM_WORKERS.name:
            workers = int(value)  # type: ignore[arg-type]
    return kwargs
