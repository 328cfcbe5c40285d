"""A no-op numerical perturbation of a model's initial weights, for quality references.

Whether a change "trains the same" is judged against how far the baseline's own loss
trajectory moves when nothing that matters changes (`torchdoctor.tune.parity`). The
perturbation that defines "nothing that matters" multiplies every floating-point parameter by
``1 + u * e`` with ``e`` uniform in [-1, 1] and ``u = 2**-8``, the unit roundoff of bfloat16:
one bf16 rounding of the initial weights.

Why this size: it is no larger than what the knobs under judgement do to the arithmetic (bf16
autocast rounds the weights to that precision in every matmul; fp16 to 2**-11; a reordered
reduction, as threads, channels_last or compiled kernels produce, to about 2**-24 per op), and
it is far inside the spread of any random initialisation (Kaiming-uniform weights vary by 100%),
so it cannot make a model learn better or worse. Same seed, same data and same order: only the
chaotic amplification of a rounding-sized difference separates the perturbed run from the
baseline, which is exactly what separates a harmless change from the baseline.
"""

from __future__ import annotations

from typing import Final

import torch
from torch import nn

#: Relative size of the perturbation: the unit roundoff of bfloat16 (8 significand bits).
PERTURBATION_SCALE: Final = 2.0**-8


@torch.no_grad()
def perturb_weights(model: nn.Module, index: int, *, scale: float = PERTURBATION_SCALE) -> None:
    """Multiply each floating parameter by ``1 + scale * U(-1, 1)``; `index` > 0 seeds it.

    Index 0 is the unperturbed model. The draw happens on the CPU from its own generator, so
    it neither depends on the device nor disturbs the global RNG the training loop uses.

    A sharded parameter (a DTensor, as FSDP2's `fully_shard` and tensor parallelism make)
    gets the factor its whole tensor would get: every rank draws the whole tensor's noise
    from the same seed and keeps its own shard of it (`_like`), so a sharded model is
    perturbed exactly as the same model unsharded, with no communication.
    """
    if index <= 0:
        return
    gen = torch.Generator().manual_seed(0x5EED + index)
    for param in model.parameters():
        if not param.is_floating_point():
            continue
        noise = torch.rand(param.shape, generator=gen, dtype=torch.float32).mul_(2).sub_(1)
        param.mul_(_like(noise.mul_(scale).add_(1), param))


def _like(factor: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
    """`factor` (the whole tensor's, on the CPU) on `param`'s device and dtype, and laid out as
    `param` is when it is a DTensor: its local shard, taken on each rank from the same whole
    tensor (`src_data_rank=None`: no scatter), so the in-place product is a DTensor op."""
    factor = factor.to(dtype=param.dtype)
    if not torch.distributed.is_available():  # a build without torch.distributed has no DTensor
        return factor.to(device=param.device)
    from torch.distributed.tensor import DTensor, distribute_tensor

    if isinstance(param, DTensor):
        return distribute_tensor(
            factor.to(param.to_local().device),
            param.device_mesh,
            param.placements,
            src_data_rank=None,
        )
    return factor.to(device=param.device)
