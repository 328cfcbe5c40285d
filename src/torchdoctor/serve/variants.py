"""Inference variants: the ways one model can be served, each gated on accuracy against fp32
eager.

`prepare_variant(name, model, example_inputs, device=...)` copies the model, applies the
variant, runs it once (compilers compile lazily, so the first call is part of the setup) and
compares its outputs with fp32 eager's in eval mode under no_grad. Where a lossy variant
(reduced precision, int8) breaks its tolerance, a per-module fallback keeps the fewest modules
in fp32 that make it pass (`accuracy.fallback_modules`). A variant that cannot apply here
raises `VariantUnavailable` with the reason; the caller's model is never changed.

Variants that are knobs are the knobs' own: each knob that serves declares its variants and how
it applies to a served model (`Knob.serving`: precision's autocast, compilation, memory format,
threads), and its applicability is the knob's. The variants here are the ways of serving that
no knob is (no_grad, export, int8, casts, ...); both are listed by their rank.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final

from pydantic import Field

from torchdoctor.core.errors import KnobError
from torchdoctor.core.records import Record
from torchdoctor.knobs import Knob, KnobValue, ServedAs, context_for, served
from torchdoctor.measure import make_sync
from torchdoctor.serve.accuracy import (
    MAX_FALLBACK_CANDIDATES,
    OutputError,
    Tolerance,
    VariantAccuracy,
    fallback_modules,
    output_error,
    within,
)
from torchdoctor.serve.variant_builds import (
    Args,
    Build,
    Forward,
    Target,
    VariantError,
    VariantUnavailable,
    as_args,
    build_cast,
    build_export,
    build_inference_mode,
    build_int8,
    build_knob,
    build_no_grad,
    build_torchscript,
    cast_floats,
    compiled,
)

if TYPE_CHECKING:
    import torch
    from torch import nn

#: fp32 variants may only reorder sums. torchbench's accuracy check of fp32 inference under
#: torch.compile, which inductor's CI runs, is torch.allclose at 1e-4 both ways (pytorch
#: benchmarks/dynamo/torchbench.py, `get_tolerance_and_cosine_flag`).
FP32_TOLERANCE: Final = Tolerance(
    kind="allclose",
    atol=1e-4,
    rtol=1e-4,
    source="torchbench's fp32 inference accuracy check (torch.allclose, atol=rtol=1e-4; "
    "pytorch benchmarks/dynamo/torchbench.py)",
)
#: Lossy variants change every element a little. torchao's tests hold an int8 linear layer to
#: SQNR >= 35 dB against its float original (test/integration/test_integration.py,
#: `min_sqnr=35`); bf16 (8 significant bits) and fp16 (11) round no coarser than int8's 8-bit
#: grid, so the same floor applies. Held here to the whole model's outputs, stricter than one
#: layer's; the per-module fallback names the modules that break it.
LOSSY_TOLERANCE: Final = Tolerance(
    kind="sqnr",
    min_sqnr_db=35.0,
    source="torchao's int8 layer tests (SQNR >= 35 dB, test/integration/test_integration.py), "
    "held to the whole model's outputs",
)

#: What separates a variant's name from the value given with it: "threads:4".
VALUE_SEPARATOR: Final = ":"


@dataclass(frozen=True)
class VariantSpec:
    """One way to serve a model: what it does, its accuracy tolerance, how it is built.

    `fallback`: whether a per-module fp32 fallback can repair it (lossy variants), and
    `fallback_linear_only` whether only nn.Linear layers are its candidates (int8 quantizes
    nothing else, so keeping another module changes nothing).
    `keeps_mode`: whether it runs the module in the training mode the caller left it in
    (every other variant calls `.eval()` first). `rank`: its place in the list of variants.
    `knob`: the knob it is (None: a way of serving no knob is), at `value` (None with a
    `parameter`: the value comes with the name, 'threads:4').
    """

    name: str
    description: str
    tolerance: Tolerance
    build: Build
    fallback: bool = False
    fallback_linear_only: bool = False
    keeps_mode: bool = False
    rank: int = 0
    knob: Knob | None = None
    value: KnobValue = None
    parameter: str | None = None


@dataclass(frozen=True)
class PreparedVariant:
    """A variant ready to serve: `call(inputs)` runs one forward with no autograd.

    `setup_s`: the time to apply the variant and run its first call (compilation, export,
    tracing, quantization), kept apart from the per-request latency. `accuracy`: its gate.
    """

    name: str
    spec: VariantSpec
    forward: Forward
    setup_s: float
    accuracy: VariantAccuracy
    device: str = "cpu"

    def call(self, inputs: Any) -> Any:
        return self.forward(as_args(inputs))

    def record(self) -> VariantSetup:
        """What a report shows of the variant: its description, setup time and accuracy."""
        return VariantSetup(
            name=self.name,
            description=self.spec.description,
            device=self.device,
            setup_s=self.setup_s,
            accuracy=self.accuracy,
        )


class VariantSetup(Record):
    """A prepared variant as a record: its setup time apart from requests, and its accuracy."""

    schema_name: ClassVar[str] = "serve_variant"
    schema_version: ClassVar[int] = 1

    name: str
    description: str
    device: str
    setup_s: float = Field(ge=0)
    accuracy: VariantAccuracy


#: The ways of serving that no knob is; the knobs' own are `Knob.serving`'s.
_OWN_SPECS = (
    VariantSpec(
        "no_grad",
        "eager forward under torch.no_grad(), in the training mode the model was given in "
        "(a model left in train mode keeps its dropout and batch statistics, and fails the "
        "gate against eval mode)",
        FP32_TOLERANCE,
        build_no_grad,
        keeps_mode=True,
        rank=10,
    ),
    VariantSpec(
        "inference_mode",
        "eager forward under torch.inference_mode() (no version counters or view tracking), "
        "in the training mode the model was given in",
        FP32_TOLERANCE,
        build_inference_mode,
        keeps_mode=True,
        rank=20,
    ),
    VariantSpec(
        "eval",
        "model.eval() (dropout off, batch-norm running statistics), eager under no_grad",
        FP32_TOLERANCE,
        build_no_grad,
        rank=30,
    ),
    VariantSpec(
        "compile_freezing",
        "torch.compile with inductor freezing (torch._inductor.config.freezing: weights "
        "folded in as constants, conv-batchnorm fused)",
        FP32_TOLERANCE,
        compiled("default", {"freezing": True}),
        rank=60,
    ),
    VariantSpec(
        "export",
        "torch.export.export, then its program's module run eagerly (batch dimension dynamic "
        "where the model allows)",
        FP32_TOLERANCE,
        build_export,
        rank=70,
    ),
    VariantSpec(
        "torchscript",
        "torch.jit.trace then torch.jit.freeze: the older route, deprecated in recent torch "
        "(torch.compile and torch.export replace it); measured against today's compiler, not "
        "assumed faster or slower",
        FP32_TOLERANCE,
        build_torchscript,
        rank=80,
    ),
    VariantSpec(
        "int8_dynamic",
        "dynamic int8 quantization of nn.Linear layers (torchao's int8 dynamic activation, "
        "int8 weight where torchao is installed, else torch.ao quantize_dynamic on a CPU)",
        LOSSY_TOLERANCE,
        build_int8,
        fallback=True,
        fallback_linear_only=True,
        rank=90,
    ),
    VariantSpec(
        "bf16",
        "weights and floating inputs cast to bfloat16 (half the memory traffic of fp32)",
        LOSSY_TOLERANCE,
        build_cast("bf16"),
        fallback=True,
        rank=120,
    ),
    VariantSpec(
        "fp16",
        "weights and floating inputs cast to float16",
        LOSSY_TOLERANCE,
        build_cast("fp16"),
        fallback=True,
        rank=130,
    ),
)


def _knob_spec(knob: Knob, variant: ServedAs) -> VariantSpec:
    lossy = knob.serving is not None and knob.serving.lossy
    return VariantSpec(
        variant.name,
        variant.description,
        LOSSY_TOLERANCE if lossy else FP32_TOLERANCE,
        build_knob(knob, variant.value, lossy=lossy),
        fallback=lossy,
        rank=variant.rank,
        knob=knob,
        value=variant.value,
        parameter=variant.parameter,
    )


def _variants() -> dict[str, VariantSpec]:
    specs = [*_OWN_SPECS, *(_knob_spec(knob, variant) for knob, variant in served())]
    return {spec.name: spec for spec in sorted(specs, key=lambda spec: spec.rank)}


class _Variants(Mapping[str, VariantSpec]):
    """Every variant by name, read when asked: a knob registered into the catalogue serves."""

    def __getitem__(self, name: str) -> VariantSpec:
        return _variants()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(_variants())

    def __len__(self) -> int:
        return len(_variants())


#: Every variant by name, in rank order. One that takes a value is named with it: 'threads:4'.
VARIANTS: Final[Mapping[str, VariantSpec]] = _Variants()


def variant_spec(name: str) -> tuple[VariantSpec, KnobValue]:
    """The spec of a variant name and the value given with it ('threads:N'), or VariantError."""
    variants = _variants()
    base, separator, text = name.partition(VALUE_SEPARATOR)
    spec = variants.get(base) if separator else None
    if spec is not None and spec.parameter is not None:
        if not text.isdigit():
            raise VariantError(
                f"variant '{name}': {spec.parameter} must be a whole number",
                hint=f"'{base}{VALUE_SEPARATOR}4'",
            )
        return spec, int(text)
    spec = variants.get(name)
    if spec is None or spec.parameter is not None:
        raise VariantError(
            f"unknown variant '{name}'",
            hint="known variants: "
            + ", ".join(
                n if s.parameter is None else f"{n}{VALUE_SEPARATOR}N" for n, s in variants.items()
            ),
        )
    return spec, None


def _check_applicable(spec: VariantSpec, target: Target) -> None:
    """A variant that is a knob applies where the knob's value does."""
    if spec.knob is None:
        return
    value = target.value if spec.value is None else spec.value
    try:
        spec.knob.check_value(value)
        ctx = context_for(None, str(target.device))  # never None: the device is named
        if ctx is not None:
            spec.knob.check_applicable(value, ctx)
    except KnobError as exc:
        raise VariantUnavailable(target.name, getattr(exc, "reason", exc.message)) from None


def _candidates(model: nn.Module, *, linear_only: bool) -> list[str]:
    """The modules a fallback may keep in fp32: leaves that hold parameters (nn.Linear
    layers only with `linear_only`), in model order."""
    from torch import nn

    return [
        name
        for name, module in model.named_modules()
        if name
        and not any(True for _ in module.children())
        and any(True for _ in module.parameters(recurse=False))
        and (not linear_only or isinstance(module, nn.Linear))
    ]


@dataclass
class _Built:
    forward: Forward
    outputs: Any
    setup_s: float


def _build(
    spec: VariantSpec,
    model: nn.Module,
    args: Args,
    target: Target,
    clock: Callable[[], float],
) -> _Built:
    """Copy `model`, apply the variant and run it once; setup_s covers both."""
    sync = make_sync(target.device)
    work = copy.deepcopy(model)
    if not spec.keeps_mode:
        work.eval()
    sync()
    start = clock()
    try:
        forward = spec.build(work, args, target)
        outputs = forward(args)
    except VariantError:
        raise
    except Exception as exc:  # a variant's own failure is data: it does not apply here
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise VariantUnavailable(target.name, f"{type(exc).__name__}: {first_line}") from exc
    sync()
    return _Built(forward, outputs, clock() - start)


def reference_outputs(model: nn.Module, args: Args) -> Any:
    """fp32 eager's outputs in eval mode under no_grad: what every variant is held to.

    A model all in fp32 runs as it is, switched to eval mode for the call and back after (no
    copy: a served model can be most of a device's memory); another is copied and cast.
    """
    import torch

    fp32 = all(
        t.dtype == torch.float32
        for t in [*model.parameters(), *model.buffers()]
        if t.is_floating_point()
    )
    reference = model if fp32 else copy.deepcopy(model).float()
    # Each module's own flag: a model may hold a submodule in eval mode (a frozen batch norm),
    # which `train(True)` on the whole would undo.
    modes = [(m, m.training) for m in reference.modules()]
    reference.eval()
    try:
        with torch.no_grad():
            return reference(*cast_floats(args, torch.float32))
    except Exception as exc:
        raise VariantError(
            f"the model fails as fp32 eager in eval mode: {type(exc).__name__}: {exc}",
            hint="check that the model and its example inputs run with model.eval()",
        ) from exc
    finally:
        for module, training in modes:
            module.training = training


def _on_device(model: nn.Module, device: torch.device) -> bool:
    tensors = [*model.parameters(), *model.buffers()]
    return all(_same_device(t.device, device) for t in tensors)


def _same_device(a: torch.device, b: torch.device) -> bool:
    # torch.device("cuda") names the current device, which tensors report with its index.
    return a.type == b.type and (a.index == b.index or a.index is None or b.index is None)


def prepare_variant(
    name: str,
    model: nn.Module,
    example_inputs: Any,
    *,
    device: str | torch.device,
    clock: Callable[[], float] = time.perf_counter,
) -> PreparedVariant:
    """`model` served as the variant `name`, with its setup time and its accuracy gate.

    `example_inputs`: a tuple of positional arguments or one argument. The model and inputs
    are copied to `device`; the caller's model is left as it was. Raises VariantUnavailable
    where the variant cannot apply here, VariantError for an unknown name or a model that fails
    as fp32 eager.
    """
    import torch

    spec, value = variant_spec(name)
    target = Target(torch.device(device), name, value=value)
    _check_applicable(spec, target)
    # The caller's model is only read (and deep-copied by each build); it is copied here only
    # where `.to(device)`, which moves a module in place, must move it.
    original = model if _on_device(model, target.device) else copy.deepcopy(model).to(target.device)
    target = dataclasses.replace(target, original=original)
    args = _to_device(as_args(example_inputs), target.device)
    reference = reference_outputs(original, args)
    built = _build(spec, original, args, target, clock)
    error = _error(reference, built.outputs, spec, target)
    if within(error, spec.tolerance) or not spec.fallback:
        accuracy = VariantAccuracy(
            variant=name,
            tolerance=spec.tolerance,
            error=error,
            passed=within(error, spec.tolerance),
        )
        return PreparedVariant(
            name, spec, built.forward, built.setup_s, accuracy, str(target.device)
        )
    return _with_fallback(spec, original, args, target, reference, error, built, clock)


def _with_fallback(
    spec: VariantSpec,
    original: nn.Module,
    args: Args,
    target: Target,
    reference: Any,
    error: OutputError,
    built: _Built,
    clock: Callable[[], float],
) -> PreparedVariant:
    candidates = _candidates(original, linear_only=spec.fallback_linear_only)
    if len(candidates) > MAX_FALLBACK_CANDIDATES:
        accuracy = VariantAccuracy(
            variant=target.name,
            tolerance=spec.tolerance,
            error=error,
            passed=False,
            note=f"no fallback tried: {len(candidates)} modules with weights, more than "
            f"{MAX_FALLBACK_CANDIDATES}",
        )
        return PreparedVariant(
            target.name, spec, built.forward, built.setup_s, accuracy, str(target.device)
        )

    def error_keeping(names: frozenset[str]) -> OutputError:
        kept = target.keeping(names)
        return _error(reference, _build(spec, original, args, kept, clock).outputs, spec, kept)

    found = fallback_modules(candidates, error_keeping, spec.tolerance)
    if found is None:
        accuracy = VariantAccuracy(
            variant=target.name,
            tolerance=spec.tolerance,
            error=error,
            passed=False,
            note="keeping every module with weights in fp32 still breaks the tolerance",
        )
        return PreparedVariant(
            target.name, spec, built.forward, built.setup_s, accuracy, str(target.device)
        )
    kept_names, _ = found
    kept = target.keeping(frozenset(kept_names))
    final = _build(spec, original, args, kept, clock)  # its own setup time, the search apart
    accuracy = VariantAccuracy(
        variant=target.name,
        tolerance=spec.tolerance,
        error=_error(reference, final.outputs, spec, kept),
        passed=True,
        fp32_modules=kept_names,
        error_without_fallback=error,
    )
    return PreparedVariant(
        target.name, spec, final.forward, final.setup_s, accuracy, str(target.device)
    )


def _error(reference: Any, outputs: Any, spec: VariantSpec, target: Target) -> OutputError:
    try:
        return output_error(reference, outputs, spec.tolerance)
    except ValueError as exc:
        raise VariantUnavailable(target.name, str(exc)) from None


def _to_device(args: Args, device: torch.device) -> Args:
    import torch

    return tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)


__all__ = [
    "FP32_TOLERANCE",
    "LOSSY_TOLERANCE",
    "VARIANTS",
    "PreparedVariant",
    "VariantError",
    "VariantSetup",
    "VariantSpec",
    "VariantUnavailable",
    "prepare_variant",
    "reference_outputs",
    "variant_spec",
]
