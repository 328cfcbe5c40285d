"""A `Recipe`: a frozen, validated mapping knob -> value.

Only the knobs set explicitly are stored (so a recipe prints as what was changed); `resolved()`
adds every other knob's default. A recipe built with a workload and a device is also checked
for applicability there; one built without them is checked for domains only, and the engine
re-checks it against the real workload and device in `prepare()`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from torchdoctor.core.errors import KnobError
from torchdoctor.knobs.base import ApplicabilityContext, KnobValue, cuda_capability_of
from torchdoctor.knobs.catalogue import catalogue, get_knob


def context_for(workload: Any | None, device: str | None) -> ApplicabilityContext | None:
    """The applicability context of a workload (any object with `kind`, `name`) on a device.

    Asks torch.cuda for the compute capability only when the device is CUDA.
    """
    if workload is None and device is None:
        return None
    device = device or "cpu"
    return ApplicabilityContext(
        device=device,
        workload_kind=getattr(workload, "kind", None),
        workload_name=getattr(workload, "name", None),
        supports_checkpointing=workload is None
        or callable(getattr(workload, "checkpoint_blocks", None)),
        cuda_capability=cuda_capability_of(device),
        workload_params=settable_params(workload),
    )


def settable_params(workload: Any | None) -> dict[str, Any]:
    """The workload's parameters a `WorkloadParameter` knob may set: its `params`, where it
    can be rebuilt with other ones (`with_params`); else none."""
    params = getattr(workload, "params", None)
    if not callable(getattr(workload, "with_params", None)) or not isinstance(params, Mapping):
        return {}
    return dict(params)


class Recipe(Mapping[str, KnobValue]):
    """Knob settings for one run. Immutable; compare, hash and diff by value."""

    __slots__ = ("_context", "_values")

    def __init__(
        self,
        values: Mapping[str, KnobValue] | None = None,
        *,
        workload: Any | None = None,
        device: str | None = None,
    ) -> None:
        ordered: dict[str, KnobValue] = {}
        given = dict(values or {})
        for name in given:
            get_knob(name)  # raises KnobError for an unknown name
        for knob in catalogue():  # catalogue order, so equal recipes print alike
            if knob.name in given:
                knob.check_value(given[knob.name])
                ordered[knob.name] = given[knob.name]
        self._values = ordered
        self._context = context_for(workload, device)
        if self._context is not None:
            self.check_applicable(self._context)

    # construction

    @classmethod
    def parse(
        cls,
        assignments: Iterable[str],
        *,
        workload: Any | None = None,
        device: str | None = None,
    ) -> Recipe:
        """Build from `["knob=value", ...]` as typed on the command line."""
        values: dict[str, KnobValue] = {}
        for item in assignments:
            name, sep, text = item.partition("=")
            name = name.strip()
            if not sep or not name:
                raise KnobError(
                    f"cannot read recipe setting {item!r}", hint="write it as knob=value"
                )
            values[name] = get_knob(name).parse(text)
        return cls(values, workload=workload, device=device)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, KnobValue],
        *,
        workload: Any | None = None,
        device: str | None = None,
    ) -> Recipe:
        return cls(data, workload=workload, device=device)

    def with_changes(self, **changes: KnobValue) -> Recipe:
        """A new recipe with some knobs changed, validated in this recipe's context."""
        new = Recipe({**self._values, **changes})
        if self._context is not None:
            new._context = self._context
            new.check_applicable(self._context)
        return new

    # validation

    def check_applicable(self, ctx: ApplicabilityContext) -> None:
        """Raise KnobError naming the first knob whose setting does not apply in `ctx`."""
        resolved = self.resolved(ctx.device)
        full = dataclasses.replace(ctx, settings=resolved)
        for name, value in self._values.items():
            get_knob(name).check_applicable(value, full)

    # reading

    def resolved(self, device: str = "cpu") -> dict[str, KnobValue]:
        """Every knob's value: the explicit ones, then defaults for the rest."""
        return {k.name: self._values.get(k.name, k.default_for(device)) for k in catalogue()}

    def value(self, name: str, device: str = "cpu") -> KnobValue:
        return self._values.get(name, get_knob(name).default_for(device))

    def to_dict(self) -> dict[str, KnobValue]:
        """The explicitly set knobs (JSON-ready)."""
        return dict(self._values)

    def diff(self, other: Recipe, device: str = "cpu") -> dict[str, tuple[KnobValue, KnobValue]]:
        """Knobs whose resolved values differ: name -> (this value, other value)."""
        mine, theirs = self.resolved(device), other.resolved(device)
        return {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}

    def describe(self) -> str:
        if not self._values:
            return "baseline (all defaults)"
        return " ".join(f"{k}={get_knob(k).show(v)}" for k, v in self._values.items())

    # Mapping protocol and value semantics

    def __getitem__(self, name: str) -> KnobValue:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Recipe):
            return self._values == other._values
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, repr(v)) for k, v in self._values.items())))

    def __repr__(self) -> str:
        return f"Recipe({self._values!r})"
