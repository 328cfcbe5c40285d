"""CUDA-only knobs: cudnn.benchmark, TF32 matmuls, CUDA graphs. Inapplicable elsewhere."""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from torchdoctor.core.errors import KnobError
from torchdoctor.core.gpu import sm_name
from torchdoctor.knobs.base import (
    ApplicabilityContext,
    Choice,
    Knob,
    before_ampere,
    cuda_only,
)
from torchdoctor.knobs.precision import autocast_context

CUDNN_BENCHMARK = Knob(
    name="cudnn_benchmark",
    family="cuda",
    description="Let cuDNN time its conv algorithms on the first shapes and keep the fastest.",
    code_change="torch.backends.cudnn.benchmark = True",
    safety="close",
    domain=Choice((False, True)),
    default=False,
    not_applicable=cuda_only,
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
        'torch.backends.cuda.matmul.fp32_precision = "tf32"; '
        'torch.backends.cudnn.conv.fp32_precision = "tf32"'
    ),
    safety="close",
    domain=Choice((False, True)),
    default=False,
    not_applicable=_tf32_applies,
)


def _graphs_apply(ctx: ApplicabilityContext) -> str | None:
    reason = cuda_only(ctx)
    if reason is not None:
        return reason
    if ctx.settings.get("compile", "off") != "off":
        return "torch.compile manages its own CUDA graphs (compile=reduce-overhead); use one"
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
)

KNOBS = (CUDNN_BENCHMARK, TF32, CUDA_GRAPHS)


#: Process-wide backend flags the CUDA knobs touch, as saved by `apply_cuda_flags`.
CudaFlags = dict[str, bool | str]


def _has_fp32_precision_api() -> bool:
    # torch >= 2.9 controls TF32 with `fp32_precision` ("ieee" | "tf32") per backend and op;
    # allow_tf32 is the legacy API, and reading one after the other was set raises a
    # RuntimeError about mixing them (PyTorch CUDA semantics notes, "TensorFloat-32").
    return hasattr(torch.backends.cuda.matmul, "fp32_precision")


def _cudnn_conv() -> Any:
    # torch.backends.cudnn is replaced at import by a module object with `conv`/`rnn`
    # sub-settings that type stubs do not declare.
    return cast(Any, torch.backends.cudnn).conv


def read_cuda_flags() -> CudaFlags:
    """The current values of every flag `apply_cuda_flags` may change."""
    flags: CudaFlags = {"cudnn_benchmark": bool(torch.backends.cudnn.benchmark)}
    if _has_fp32_precision_api():
        flags["matmul_fp32_precision"] = str(torch.backends.cuda.matmul.fp32_precision)
        flags["conv_fp32_precision"] = str(_cudnn_conv().fp32_precision)
    else:
        flags["matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        flags["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
    return flags


def restore_cuda_flags(flags: CudaFlags) -> None:
    """Put back flags saved by `read_cuda_flags` (or returned by `apply_cuda_flags`)."""
    torch.backends.cudnn.benchmark = bool(flags["cudnn_benchmark"])
    if "matmul_fp32_precision" in flags:
        torch.backends.cuda.matmul.fp32_precision = str(flags["matmul_fp32_precision"])
        _cudnn_conv().fp32_precision = str(flags["conv_fp32_precision"])
    else:
        torch.backends.cuda.matmul.allow_tf32 = bool(flags["matmul_allow_tf32"])
        torch.backends.cudnn.allow_tf32 = bool(flags["cudnn_allow_tf32"])


def apply_cuda_flags(*, cudnn_benchmark: bool, tf32: bool) -> CudaFlags:
    """Set the process-wide backend flags; returns the previous values for `restore_cuda_flags`.

    tf32=True: fp32 matmuls and cuDNN convolutions may use TF32 tensor cores. tf32=False
    (the knob's default, a plain training loop) means torch's defaults: IEEE fp32 matmuls,
    and cuDNN convolutions left as they are, which torch already runs in TF32 by default.
    """
    previous = read_cuda_flags()
    torch.backends.cudnn.benchmark = cudnn_benchmark
    if _has_fp32_precision_api():
        torch.backends.cuda.matmul.fp32_precision = "tf32" if tf32 else "ieee"
        if tf32:
            _cudnn_conv().fp32_precision = "tf32"
    else:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        if tf32:
            torch.backends.cudnn.allow_tf32 = True
    return previous


def graph_model(model: nn.Module, sample_inputs: Any, precision: str = "fp32") -> nn.Module:
    """Capture the model's forward and backward in CUDA graphs (needs fixed input shapes).

    Per the torch.cuda.make_graphed_callables docs: sample args must be tensors whose
    requires_grad matches the real inputs (batches do not require grad), the module must be
    in the mode it trains in, and autocast is supported only with its cache disabled. The
    capture runs under the same autocast as training, since a graph replays the kernels it
    recorded whatever context it is later called in.
    """
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
