"""Attention through `scaled_dot_product_attention` where a workload computes it by hand.

Hand-written attention (matmul, mask, softmax, matmul: nanoGPT's slow path) writes the T x T
score matrix out and keeps it, and its softmax, for backward; torch's fused kernel (flash or
memory-efficient on a GPU, a fused kernel on the CPU) computes the same attention in tiles and
saves only the queries, keys, values, output and the softmax's log-sum-exp. So the change is
faster and, in training, frees the score tensors saved for backward (the memory ladder's
first step, `tune.fit`).

No knob rewrites a model's code: the knob sets the workload's own `attention` parameter, which
a workload exposes when it can build its model either way (the built-in `gpt`:
`--param attention=manual` is the hand-written path). It applies only where that parameter
is "manual"; a script's attention is its own code, so `handwritten_attention` hands that
change back as a patch at its line instead. The same math up to float rounding (another
order of summation, the softmax taken in tiles): `close`, held to the quality check like
compilation.
"""

from __future__ import annotations

from typing import Final

from torchdoctor.knobs.base import ApplicabilityContext, Choice, Knob
from torchdoctor.knobs.parts import (
    Ladder,
    MemoryStep,
    NotWritten,
    Script,
    WorkloadParameter,
)

#: The workload parameter the knob sets, and its hand-written value (`workloads.gpt`).
PARAMETER: Final = "attention"
HAND_WRITTEN: Final = "manual"
FUSED: Final = "sdpa"


def _hand_written(ctx: ApplicabilityContext) -> str | None:
    if PARAMETER not in ctx.workload_params:
        return (
            f"workload '{ctx.workload_name}' has no '{PARAMETER}' parameter to switch "
            "(a model's own attention code changes by hand: the handwritten_attention "
            "finding hands it back)"
        )
    current = ctx.workload_params[PARAMETER]
    if current != HAND_WRITTEN:
        return f"workload '{ctx.workload_name}' computes attention through '{current}' already"
    return None


ATTENTION = Knob(
    name="attention",
    family="attention",
    description=(
        "Compute attention with torch's fused scaled_dot_product_attention instead of "
        "matmul, softmax, matmul (the T x T scores are never stored)."
    ),
    code_change="y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)",
    safety="close",
    domain=Choice((FUSED,)),
    # None: the workload's own attention.
    default=None,
    not_applicable=_hand_written,
    applies_to=WorkloadParameter(PARAMETER),
    write_back=NotWritten(
        "a script's attention is its own code: the handwritten_attention finding gives the "
        "snippet for its line"
    ),
    # Where it applies at all (a workload with hand-written attention) the diagnosis
    # prescribes it, which puts it first. By the prior: right after compile on a GPU, where
    # the fused kernel is the largest algorithm-level win (2-4x on the attention itself,
    # FlashAttention sec. 4) and a trial costs no compilation; on a CPU after the thread
    # count and the loader workers, whose wins are larger (cpu_prior), since its fused CPU
    # kernel measured 1.12x on a whole step (benchmarks/bench_sdpa_prescription.py).
    ladder=Ladder(gpu=5, cpu=25, memory=MemoryStep(10, "sdpa")),
    script=Script(
        not_injectable="it switches a workload's attention parameter; a script's attention "
        "is its own code (the handwritten_attention finding hands it back as a patch)"
    ),
)

KNOBS = (ATTENTION,)
