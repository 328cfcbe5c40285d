"""The accuracy gate of an inference variant: its outputs against fp32 eager's, and the modules
a per-module fallback keeps in fp32 where one module breaks the tolerance.

Two kinds of tolerance, because two kinds of change: a variant that keeps fp32 math (a
compiler, a graph capture, another memory layout or thread count) may only reorder sums, so
every element must be close (`allclose`); a lossy variant (reduced precision, int8) changes
every element a little by design, so the gate is on the outputs' signal-to-noise ratio
(`sqnr`), the measure quantization libraries hold their own layers to.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final, Literal

from pydantic import Field

from torchdoctor.core.records import SubRecord

#: Most leaf modules the per-module fallback tries one by one. Each try is one forward of the
#: variant; past this the search would cost more than the variant's measurement, and a model
#: where that many modules each matter is better served by another variant.
MAX_FALLBACK_CANDIDATES: Final = 64

#: The error recorded for outputs with a NaN or an infinity: JSON has no infinity, and the
#: largest float fails every tolerance.
NONFINITE_ERROR: Final = sys.float_info.max

ToleranceKind = Literal["allclose", "sqnr"]


class Tolerance(SubRecord):
    """How close a variant's outputs must be to fp32 eager's, and where that bound comes from.

    `allclose`: every element |out - ref| <= atol + rtol * |ref| (torch.allclose's rule).
    `sqnr`: 20 log10(||ref|| / ||out - ref||) >= min_sqnr_db over all outputs together.
    """

    kind: ToleranceKind
    atol: float = Field(default=0.0, ge=0)
    rtol: float = Field(default=0.0, ge=0)
    min_sqnr_db: float = 0.0
    source: str

    def describe(self) -> str:
        if self.kind == "allclose":
            return f"|out - ref| <= {self.atol:g} + {self.rtol:g} * |ref|"
        return f"SQNR >= {self.min_sqnr_db:g} dB"


class OutputError(SubRecord):
    """How far one set of outputs is from the reference's, over every floating output.

    `max_rel_error` is normwise (max |out - ref| / max |ref|), which stays finite where the
    reference has zeros; `within_allclose` is whether the tolerance's elementwise rule held
    (always computed, so an sqnr-gated variant still says how it fares elementwise).
    """

    max_abs_error: float
    max_rel_error: float
    sqnr_db: float | None  # None: identical outputs (an infinite ratio)
    within_allclose: bool
    finite: bool = True


class VariantAccuracy(SubRecord):
    """A variant's accuracy against fp32 eager, with the fallback's modules kept in fp32
    (versioned with `variants.VariantSetup`, which holds it).

    `error` is of the variant as served (with `fp32_modules` kept in fp32, if any);
    `error_without_fallback` is of the variant applied to every module, present only when a
    fallback was tried. `passed` is the gate on `error`.
    """

    variant: str
    tolerance: Tolerance
    error: OutputError
    passed: bool
    fp32_modules: list[str] = Field(default_factory=list)
    error_without_fallback: OutputError | None = None
    note: str = ""


def floating_tensors(outputs: Any) -> Iterator[Any]:
    """The floating-point tensors of a (nested tuple/list/dict of) outputs, in order."""
    import torch

    if isinstance(outputs, torch.Tensor):
        if outputs.is_floating_point():
            yield outputs
    elif isinstance(outputs, tuple | list):
        for item in outputs:
            yield from floating_tensors(item)
    elif isinstance(outputs, dict):
        for key in sorted(outputs, key=str):
            yield from floating_tensors(outputs[key])


def output_error(reference: Any, outputs: Any, tolerance: Tolerance) -> OutputError:
    """How far `outputs` are from `reference`, in float64 on the host.

    Raises ValueError where the two do not have the same floating tensors of the same shapes
    (a variant that changes what the model returns is not the same model).
    """
    import torch

    refs, outs = list(floating_tensors(reference)), list(floating_tensors(outputs))
    if len(refs) != len(outs) or any(r.shape != o.shape for r, o in zip(refs, outs, strict=True)):
        raise ValueError(
            f"the outputs differ in structure: {[tuple(r.shape) for r in refs]} vs "
            f"{[tuple(o.shape) for o in outs]}"
        )
    if not refs:
        raise ValueError("the model returns no floating-point tensor to compare")
    ref = torch.cat([r.detach().reshape(-1).to("cpu", torch.float64) for r in refs])
    out = torch.cat([o.detach().reshape(-1).to("cpu", torch.float64) for o in outs])
    diff = (out - ref).abs()
    if not bool(torch.isfinite(out).all()):
        return OutputError(
            max_abs_error=NONFINITE_ERROR,
            max_rel_error=NONFINITE_ERROR,
            sqnr_db=-NONFINITE_ERROR,
            within_allclose=False,
            finite=False,
        )
    max_abs = float(diff.max())
    scale = float(ref.abs().max())
    noise = float(diff.norm())
    return OutputError(
        max_abs_error=max_abs,
        max_rel_error=max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else NONFINITE_ERROR),
        sqnr_db=None if noise == 0 else 20.0 * math.log10(max(float(ref.norm()), 1e-300) / noise),
        within_allclose=bool((diff <= tolerance.atol + tolerance.rtol * ref.abs()).all()),
    )


def within(error: OutputError, tolerance: Tolerance) -> bool:
    """Whether `error` passes `tolerance`'s gate."""
    if tolerance.kind == "allclose":
        return error.within_allclose
    return error.sqnr_db is None or error.sqnr_db >= tolerance.min_sqnr_db


def _badness(error: OutputError) -> float:
    """An order for errors: lower SQNR is worse; identical outputs are best."""
    return -math.inf if error.sqnr_db is None else -error.sqnr_db


def fallback_modules(
    candidates: Sequence[str],
    error_keeping: Callable[[frozenset[str]], OutputError],
    tolerance: Tolerance,
) -> tuple[list[str], OutputError] | None:
    """The fewest candidates, chosen greedily, that kept in fp32 make the variant pass.

    `error_keeping(names)` builds the variant with `names` kept in fp32, runs it, and returns
    its error. First each candidate alone is tried (one forward each) and ranked by how much
    keeping it helps; then the ranked candidates are kept one more at a time until the gate
    passes. A module that breaks the tolerance on its own is found by the first pass; several
    that each add a little are found by the second. None when keeping all of them still
    fails (the variant is wrong elsewhere, not in any one module).
    """
    ranked = sorted(candidates, key=lambda name: _badness(error_keeping(frozenset([name]))))
    kept: list[str] = []
    for name in ranked:
        kept.append(name)
        error = error_keeping(frozenset(kept))
        if within(error, tolerance):
            return kept, error
    return None
