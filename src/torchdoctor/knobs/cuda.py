"""CUDA-only knobs: cudnn.benchmark, TF32 matmuls, CUDA graphs. Inapplicable elsewhere."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from torchdoctor.core.errors import KnobError
from torchdoctor.core.gpu import sm_name
from torchdoctor.knobs.base import (
    ApplicabilityContext,
    Choice,
    Knob,
    KnobValue,
    before_ampere,
    cuda_only,
)
from torchdoctor.knobs.checkpointing import GRAPHS_VS_CHECKPOINTING
from torchdoctor.knobs.parts import (
    NOT_IN_SCRIPTS,
    Ladder,
    ModelTransform,
    ProcessSetting,
    Script,
    ScriptSite,
    Snippet,
)
from torchdoctor.knobs.precision import autocast_context

if TYPE_CHECKING:
    from torch import nn

    from torchdoctor.knobs.context import ModelContext

CUDNN_BENCHMARK = Knob(
    name="cudnn_benchmark",
    family="cuda",
    description="Let cuDNN time its conv algorithms on the first shapes and keep the fastest.",
    code_change="torch.backends.cudnn.benchmark = True",
    safety="close",
    domain=Choice((False, True)),
    default=False,
    not_applicable=cuda_only,
    applies_to=ProcessSetting(
        lambda value: _set_cudnn_benchmark(value),
        device_types=("cuda",),
        shown="torch.backends.cudnn.benchmark = True at start",
    ),
    write_back=Snippet(
        "at the top of the script", lambda value, device: "torch.backends.cudnn.benchmark = True"
    ),
    ladder=Ladder(gpu=50),
    script=Script(site=ScriptSite.PROCESS),
)


def _tf32_applies(ctx: ApplicabilityContext) -> str | None:
    reason = cuda_only(ctx)
    if reason is not None:
        return reason
    # TF32 is a tensor-core format introduced with Ampere; before it the flag changes nothing.
    old = before_ampere(ctx)
    if old is not None:
        return (
            "TF32 needs compute capability 8.0+ (Ampere or newer); "
            f"this GPU is {sm_name(old)}, whose fp32 matmuls it would not change"
        )
    return None


TF32 = Knob(
    name="tf32",
    family="cuda",
    description="TF32 tensor-core matmuls/convs for fp32 tensors (Ampere or newer).",
    code_change=(
        'torch.set_float32_matmul_precision("high"); torch.backends.cudnn.allow_tf32 = True'
    ),
    safety="close",
    domain=Choice((False, True)),
    default=False,
    not_applicable=_tf32_applies,
    # Sets its own flags and no other: a script given cudnn_benchmark alone keeps its own
    # float32 matmul precision (setting "highest" there as well would override the script's
    # choice, and mix the legacy API with the fp32_precision one a script on torch >= 2.9 may
    # use, which torch refuses to read back).
    applies_to=ProcessSetting(
        lambda value: _set_tf32(value),
        device_types=("cuda",),
        shown='torch.set_float32_matmul_precision("high"), cudnn.allow_tf32 = True at start',
    ),
    write_back=Snippet(
        "at the top of the script",
        lambda value, device: (
            'torch.set_float32_matmul_precision("high")\ntorch.backends.cudnn.allow_tf32 = True'
        ),
    ),
    ladder=Ladder(gpu=60),
    script=Script(site=ScriptSite.PROCESS),
    no_rule="no rule measures the fp32 matmuls a GPU could run in TF32 yet; the ladder "
    "tries it on Ampere or newer",
)


def _graphs_apply(ctx: ApplicabilityContext) -> str | None:

    reason = cuda_only(ctx)
    if reason is not None:
        return reason
    if ctx.settings.get("compile", "off") != "off":
        return "torch.compile manages its own CUDA graphs (compile=reduce-overhead); use one"
    if ctx.settings.get("checkpointing"):
        return GRAPHS_VS_CHECKPOINTING
    return None


CUDA_GRAPHS = Knob(
    name="cuda_graphs",
    family="cuda",
    description="Capture forward+backward as CUDA graphs and replay them (static shapes).",
    code_change="model = torch.cuda.make_graphed_callables(model, (sample_input,))",
    safety="exact",
    domain=Choice((False, True)),
    default=False,
    not_applicable=_graphs_apply,
    applies_to=ModelTransform("called", order=1, apply=lambda m, v, ctx: _graph(m, v, ctx)),
    write_back=NOT_IN_SCRIPTS,
    ladder=Ladder(gpu=70),
    script=Script(
        not_injectable="it needs the forward and backward captured with sample inputs ahead of "
        "the training loop; not injected"
    ),
)

KNOBS = (CUDNN_BENCHMARK, TF32, CUDA_GRAPHS)


#: Process-wide backend flags the CUDA knobs touch, as saved by `apply_cuda_flags`.
CudaFlags = dict[str, bool | str]

#: `torch.set_float32_matmul_precision` values: "highest" keeps IEEE fp32 matmuls, "high"
#: lets them use TF32 tensor cores (torch.set_float32_matmul_precision docs).
_MATMUL_TF32 = "high"
_MATMUL_IEEE = "highest"


def read_cuda_flags() -> CudaFlags:
    """The current values of every flag `apply_cuda_flags` may change."""
    import torch

    return {
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
    }


def restore_cuda_flags(flags: CudaFlags) -> None:
    """Put back flags saved by `read_cuda_flags` (or returned by `apply_cuda_flags`)."""
    import torch

    torch.backends.cudnn.benchmark = bool(flags["cudnn_benchmark"])
    torch.set_float32_matmul_precision(str(flags["matmul_precision"]))
    torch.backends.cudnn.allow_tf32 = bool(flags["cudnn_allow_tf32"])


def apply_cuda_flags(*, cudnn_benchmark: bool, tf32: bool) -> CudaFlags:
    """Set the process-wide backend flags; returns the previous values for `restore_cuda_flags`.

    tf32=True: fp32 matmuls and cuDNN convolutions may use TF32 tensor cores. tf32=False
    (the knob's default, a plain training loop) means torch's defaults: IEEE fp32 matmuls,
    and cuDNN convolutions left as they are, which torch already runs in TF32 by default.

    Only the legacy API is used (`set_float32_matmul_precision`, `cudnn.allow_tf32`), never
    torch >= 2.9's `fp32_precision` attributes: once the new one is set, reading the legacy
    getter raises about mixing the two APIs, and inductor reads it, so torch.compile failed
    under tf32=true (pytorch#166387). The legacy setters keep both views consistent.
    """
    import torch

    previous = read_cuda_flags()
    torch.backends.cudnn.benchmark = cudnn_benchmark
    torch.set_float32_matmul_precision(_MATMUL_TF32 if tf32 else _MATMUL_IEEE)
    if tf32:
        torch.backends.cudnn.allow_tf32 = True
    return previous


def _set_cudnn_benchmark(value: KnobValue) -> Callable[[], None]:
    import torch

    previous = bool(torch.backends.cudnn.benchmark)
    torch.backends.cudnn.benchmark = bool(value)

    def undo() -> None:
        torch.backends.cudnn.benchmark = previous

    return undo


def _set_tf32(value: KnobValue) -> Callable[[], None]:
    """As `apply_cuda_flags` sets TF32 (the legacy API only; its docstring says why)."""
    import torch

    matmul, cudnn = torch.get_float32_matmul_precision(), bool(torch.backends.cudnn.allow_tf32)
    torch.set_float32_matmul_precision(_MATMUL_TF32 if value else _MATMUL_IEEE)
    if value:
        torch.backends.cudnn.allow_tf32 = True

    def undo() -> None:
        torch.set_float32_matmul_precision(matmul)
        torch.backends.cudnn.allow_tf32 = cudnn

    return undo


def _graph(model: nn.Module, value: KnobValue, ctx: ModelContext) -> nn.Module:
    if not value:
        return model
    assert ctx.sample_inputs is not None  # the session gives one batch of its inputs
    return graph_model(model, ctx.sample_inputs(), str(ctx.settings.get("precision", "fp32")))


def graph_model(model: nn.Module, sample_inputs: Any, precision: str = "fp32") -> nn.Module:
    """Capture the model's forward and backward in CUDA graphs (needs fixed input shapes).

    Per the torch.cuda.make_graphed_callables docs: sample args must be tensors whose
    requires_grad matches the real inputs (batches do not require grad), the module must be
    in the mode it trains in, and autocast is supported only with its cache disabled. The
    capture runs under the same autocast as training, since a graph replays the kernels it
    recorded whatever context it is later called in.
    """
    import torch
    from torch import nn

    args = sample_inputs if isinstance(sample_inputs, tuple) else (sample_inputs,)
    if not all(isinstance(a, torch.Tensor) for a in args):
        kinds = ", ".join(type(a).__name__ for a in args)
        raise KnobError(
            f"knob 'cuda_graphs=true' needs the model's inputs to be tensors, got ({kinds})",
            hint="remove 'cuda_graphs' from the recipe, or use compile=reduce-overhead",
        )
    model.train()
    with autocast_context(precision, "cuda", cache_enabled=False):
        graphed = torch.cuda.make_graphed_callables(model, args)
    assert isinstance(graphed, nn.Module)  # a Module in gives a Module out
    return graphed


@contextlib.contextmanager
def eager_forward(model: nn.Module) -> Iterator[nn.Module]:
    """`model` running its own forward for the `with` block, where `graph_model` replaced it.

    torch.cuda.make_graphed_callables replaces a module's `forward` in place (an instance
    attribute over the class's method) and returns the same module, so calling the module
    replays the graph: its kernels bypass the dispatcher, and a FLOP counter sees none of its
    work. Without the instance attribute the class's forward runs eagerly on the same
    weights, with no copy of them; the graphed forward is put back after.
    """
    graphed = model.__dict__.pop("forward", None)
    try:
        yield model
    finally:
        if graphed is not None:
            model.__dict__["forward"] = graphed
