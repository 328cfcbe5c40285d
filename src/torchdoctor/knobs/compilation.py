"""torch.compile: mode and dynamic shapes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from torchdoctor.core.errors import KnobError
from torchdoctor.knobs.base import Choice, Knob, KnobValue, needs_compile
from torchdoctor.knobs.parts import (
    Ladder,
    ModelLine,
    ModelTransform,
    Script,
    ScriptSite,
    ServedAs,
    Serving,
    WrittenWith,
)

if TYPE_CHECKING:
    from torch import nn

    from torchdoctor.knobs.context import FoundModel, ModelContext


def _compile(model: nn.Module, value: KnobValue, ctx: ModelContext) -> nn.Module:
    return compile_model(model, str(value), dynamic=bool(ctx.settings.get("compile_dynamic")))


def _compile_line(value: KnobValue, recipe: Mapping[str, Any]) -> str | None:
    if not isinstance(value, str):
        return None
    options = [] if value == "default" else [f"mode={value!r}"]
    if recipe.get("compile_dynamic") is True:
        options.append("dynamic=True")
    return f"model = torch.compile({', '.join(['model', *options])})"


COMPILE = Knob(
    name="compile",
    family="compilation",
    description="Compile the model with torch.compile (inductor) in the given mode.",
    code_change="model = torch.compile(model, mode=MODE)",
    safety="close",
    domain=Choice(("off", "default", "reduce-overhead", "max-autotune")),
    default="off",
    applies_to=ModelTransform("called", order=0, apply=_compile),
    write_back=ModelLine(_compile_line, order=1),
    ladder=Ladder(gpu=0, cpu=0, joint=True),
    script=Script(
        site=ScriptSite.MODEL,
        unchanged=("off",),
        on_model=lambda value, found: _compile_found(value, found),
    ),
    serving=Serving(
        (
            ServedAs(
                "compile",
                "default",
                rank=40,
                description="torch.compile (inductor, default mode); compilation at the first "
                "call is setup",
            ),
            ServedAs(
                "compile_max_autotune",
                "max-autotune",
                rank=50,
                description="torch.compile mode='max-autotune' (benchmarks kernel choices at "
                "compile time)",
            ),
        ),
        lambda model, value, device_type, args: _serve_compiled(model, value),
    ),
)

COMPILE_DYNAMIC = Knob(
    name="compile_dynamic",
    family="compilation",
    description="Compile with dynamic shapes instead of specializing on the first shapes seen.",
    code_change="torch.compile(model, dynamic=True)",
    safety="close",
    domain=Choice((False, True)),
    default=False,
    not_applicable=needs_compile,
    applies_to=ModelTransform("called", order=0),  # an option of compile's transform
    write_back=WrittenWith("compile"),
    ladder=Ladder(gpu=140),
    # an option of compile's script part, which records it
    script=Script(site=ScriptSite.MODEL, unchanged=(False,), on_model=lambda value, found: None),
)

KNOBS = (COMPILE, COMPILE_DYNAMIC)


def compile_model(
    model: nn.Module,
    mode: str,
    *,
    dynamic: bool,
    options: Mapping[str, str | int | bool] | None = None,
) -> nn.Module:
    """Wrap `model` with torch.compile; compilation itself happens lazily at the first call.

    `options` are inductor settings for this compilation only (torch.compile's `options`,
    named as in `torch._inductor.config`: serving's freezing variant passes freezing=True);
    they go with the default mode, as torch.compile accepts one or the other.
    """
    if mode == "off":
        return model
    import torch
    from torch import nn

    if options and mode != "default":
        raise KnobError(
            f"torch.compile takes a mode or inductor options, not both: mode {mode!r} with "
            f"options {sorted(options)}",
            hint="pass the options with mode 'default'",
        )
    if options:
        compiled = torch.compile(model, options=dict(options), dynamic=dynamic)
    else:
        compiled = torch.compile(model, mode=torch_mode(mode), dynamic=dynamic)
    assert isinstance(compiled, nn.Module)  # torch.compile of a Module returns a Module
    return compiled


def torch_mode(mode: str) -> str | None:
    """torch.compile's `mode` for the knob's value: None is torch.compile's "default" mode."""
    return None if mode == "default" else mode


def _compile_found(value: KnobValue, found: FoundModel) -> None:
    """A script's trained model: its forward compiled (the module itself is left as it is, so
    the script's optimizer and state_dict see the same parameters); compile_dynamic's value
    is read here, and recorded with it."""
    import torch

    mode = str(value)
    dynamic = bool(found.settings.get(COMPILE_DYNAMIC.name, False))
    options: dict[str, Any] = {"mode": torch_mode(mode)}
    if found.compile_backend is not None:
        options = {"backend": found.compile_backend}
    if found.on_compile is not None:
        found.on_compile(found.model)
    found.forward = torch.compile(found.model.forward, dynamic=dynamic, **options)
    # where the model is first called: the patch writer traces the name back to its build
    found.applied(COMPILE.name, found.at_call(f"{found.name}.forward = torch.compile(mode={mode})"))
    if COMPILE_DYNAMIC.name in found.settings:
        found.applied(
            COMPILE_DYNAMIC.name, f"torch.compile(dynamic={COMPILE_DYNAMIC.show(dynamic)})"
        )


def _serve_compiled(model: nn.Module, value: KnobValue) -> Callable[[tuple[Any, ...]], Any]:
    """A served model compiled: dynamic=False specialises on the first shapes, as the knob's
    default does; torch.compile marks a dimension dynamic itself when a second size arrives."""
    compiled = compile_model(model, str(value), dynamic=False)
    return lambda args: compiled(*args)
