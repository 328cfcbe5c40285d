"""What the ladder tries: knobs, their candidate values, and the order to try them in.

Until the diagnosis stage ranks prescriptions by their bound on gain, knobs are ordered by a
static prior (below); knobs the caller prescribes come first, in the caller's order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from torchdoctor.tune.parity import SafetyClass

#: Knobs the ladder does not flip one at a time: the batch-size search owns them.
BATCH_KNOBS: Final = frozenset({"batch_size", "grad_accum"})

#: Static prior: knob families in the order of their typical gain on small training jobs.
#: torch.compile's fusion is the largest general win (PyTorch 2 paper, Ansel et al. 2024:
#: 1.3-2x geomean in training); reduced precision is next on accelerators (and is measured,
#: not assumed, on CPU, where bf16 is often slower); memory format and thread count matter for
#: convolutions and CPU runs; the data-loading and allocator knobs are usually a few percent
#: unless the diagnosis finds a data-wait bound; checkpointing trades speed for memory and
#: comes last.
STATIC_PRIOR: Final[tuple[str, ...]] = (
    "compile",
    "precision",
    "channels_last",
    "threads",
    "optimizer_impl",
    "cudnn_benchmark",
    "tf32",
    "cuda_graphs",
    "num_workers",
    "pin_memory",
    "non_blocking",
    "persistent_workers",
    "prefetch_factor",
    "set_to_none",
    "compile_dynamic",
    "checkpointing",
)

#: At most this many values per integer knob (threads, num_workers, ...): the domain's ends
#: and the powers of two between them; a ladder does not sweep integers one by one.
MAX_INT_CANDIDATES: Final = 4


@dataclass(frozen=True)
class KnobSpec:
    """A knob as the tuner sees it: candidate values and safety class."""

    name: str
    values: tuple[Any, ...]
    safety: SafetyClass
    default: Any = None


def order_knobs(specs: Sequence[KnobSpec], prescribed: Sequence[str] = ()) -> list[KnobSpec]:
    """Prescribed knobs first (their order), then the static prior, then the rest."""
    by_name = {s.name: s for s in specs}
    order: list[str] = [n for n in prescribed if n in by_name]
    order += [n for n in STATIC_PRIOR if n in by_name and n not in order]
    order += [s.name for s in specs if s.name not in order]
    return [by_name[n] for n in order]


def _int_candidates(lo: int, hi: int) -> tuple[int, ...]:
    values = {lo, hi}
    v = 1
    while v < hi:
        if v > lo:
            values.add(v)
        v *= 2
    ordered = sorted(values)
    if len(ordered) > MAX_INT_CANDIDATES:
        ordered = [*ordered[: MAX_INT_CANDIDATES - 1], ordered[-1]]
    return tuple(ordered)


def catalogue_space(device: str) -> list[KnobSpec]:
    """The knob catalogue as KnobSpecs (batch knobs included; the ladder skips them)."""
    from torchdoctor.knobs import catalogue
    from torchdoctor.knobs.base import Choice, IntRange

    specs = []
    for knob in catalogue():
        if isinstance(knob.domain, Choice):
            values: tuple[Any, ...] = tuple(knob.domain.values)
        elif isinstance(knob.domain, IntRange):
            values = _int_candidates(knob.domain.lo, min(knob.domain.upper, 64))
        else:  # pragma: no cover - a new domain type must be taught to the tuner
            continue
        specs.append(KnobSpec(knob.name, values, knob.safety, knob.default_for(device)))
    return specs


def recipe_validator(workload: str, device: str) -> Callable[[dict[str, Any]], str | None]:
    """A function returning why a recipe cannot run here (None when it can)."""
    from torchdoctor.core.errors import KnobError
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads import get_workload

    wl = get_workload(workload)

    def validate(recipe: dict[str, Any]) -> str | None:
        try:
            Recipe.from_dict(recipe, workload=wl, device=device)
        except KnobError as exc:
            return str(exc)
        return None

    return validate
