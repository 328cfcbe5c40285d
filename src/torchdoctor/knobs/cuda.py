"""CUDA-only knobs: cudnn.benchmark, TF32 matmuls, CUDA graphs. Inapplicable elsewhere."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from torchdoctor.knobs.base import ApplicabilityContext, Choice, Knob, cuda_only

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

TF32 = Knob(
    name="tf32",
    family="cuda",
    description="TF32 tensor-core matmuls/convs for fp32 tensors (Ampere or newer).",
    code_change="torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32",
    safety="close",
    domain=Choice((False, True)),
    default=False,
    not_applicable=cuda_only,
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


def apply_cuda_flags(*, cudnn_benchmark: bool, tf32: bool) -> dict[str, bool]:
    """Set the process-wide backend flags; returns the previous values so they can be restored."""
    previous = {
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "tf32": bool(torch.backends.cuda.matmul.allow_tf32),
    }
    torch.backends.cudnn.benchmark = cudnn_benchmark
    torch.backends.cuda.matmul.allow_tf32 = tf32
    if tf32:
        # cuDNN convolutions already default to TF32; matmuls are what the knob turns on.
        torch.backends.cudnn.allow_tf32 = True
    return previous


def graph_model(model: nn.Module, sample_inputs: Any) -> nn.Module:
    """Capture the model's forward and backward in CUDA graphs (needs fixed input shapes)."""
    args = sample_inputs if isinstance(sample_inputs, tuple) else (sample_inputs,)
    graphed = torch.cuda.make_graphed_callables(model, args)
    assert isinstance(graphed, nn.Module)  # a Module in gives a Module out
    return graphed
