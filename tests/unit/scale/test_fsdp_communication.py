"""FSDP2's collectives per step, their time carried to N from an all-gather fit, and DDP, FSDP
and FSDP with CPU offload side by side, on shapes worked out by hand."""

from __future__ import annotations

import pytest

from fsdp_shapes import blocks_and_root
from torchdoctor.core.errors import ScaleError
from torchdoctor.core.memory_owners import LinearFit
from torchdoctor.core.shard_memory import ModelShape
from torchdoctor.scale.fit import AlphaBetaFit
from torchdoctor.scale.fsdp import compare_strategies, fsdp_collectives, fsdp_communication


def _shape() -> ModelShape:
    return blocks_and_root(2, 8, 80, root="emb", root_rows=4, root_numel=16)


def _fit(alpha: float = 1e-4, beta: float = 1e-9, world: int = 2) -> AlphaBetaFit:
    return AlphaBetaFit(
        collective="all_gather",
        world_size=world,
        points=5,
        alpha_s=alpha,
        beta_s_per_byte=beta,
        alpha_se=1e-6,
        beta_se=1e-11,
        cov_alpha_beta=0.0,
        rel_rms_residual=0.01,
    )


def test_a_step_gathers_twice_but_the_root_once_and_reduces_each_unit() -> None:
    steps = fsdp_collectives(_shape(), 4, param_dtype_bytes=2, reduce_dtype_bytes=4)
    kinds = [(c.unit, c.kind, c.phase) for c in steps]
    assert kinds == [
        ("", "all_gather", "forward"),
        ("b0", "all_gather", "forward"),
        ("b1", "all_gather", "forward"),
        ("b1", "all_gather", "backward"),
        ("b1", "reduce_scatter", "backward"),
        ("b0", "all_gather", "backward"),
        ("b0", "reduce_scatter", "backward"),
        ("", "reduce_scatter", "backward"),
    ]
    # a block: 80 elements, 160 B in bf16, 320 B reduced in fp32; the root 16 elements
    assert [c.size_bytes for c in steps] == [32, 160, 160, 160, 320, 160, 320, 64]
    assert fsdp_collectives(_shape(), 1, param_dtype_bytes=2) == []


def test_communication_is_carried_to_n_as_a_ring() -> None:
    steps = fsdp_collectives(_shape(), 4, param_dtype_bytes=2)
    fit = _fit()
    comm = fsdp_communication(steps, fit, 4)
    # alpha x (N-1)/(2-1) steps; the bytes at the fit's link (busbw = algbw x 1/2) x 3/4
    link = (1 / 1e-9) * 0.5
    want = sum(1e-4 * 3 + 0.75 / link * c.size_bytes for c in steps)
    assert comm.seconds == pytest.approx(want)
    assert comm.low_s < comm.seconds < comm.high_s
    assert comm.link_bytes == pytest.approx(0.75 * sum(c.size_bytes for c in steps))
    # a faster network: the same latency, the bytes quicker
    fast = fsdp_communication(steps, fit, 4, busbw=100 * link)
    assert fast.seconds < comm.seconds and fast.seconds > 8 * 3e-4
    with pytest.raises(ScaleError, match="all-gather fit"):
        fsdp_communication(steps, fit.model_copy(update={"collective": "all_reduce"}), 4)


def test_ddp_fsdp_and_offload_side_by_side() -> None:
    acts = LinearFit(
        fixed_bytes=0.0, per_sample_bytes=100.0, residual_bytes=0.0, batch_sizes=[1, 2]
    )
    ddp, fsdp, offload = compare_strategies(_shape(), 4, 2, acts, param_dtype_bytes=2)
    grads = 176 * 4  # every element's fp32 gradient
    # DDP: 176 x 4 parameters and 2 x 176 x 4 + 3 x 4 state resident; the optimizer's step
    # (every gradient, 704 B) outweighs the backward's 200 B of activations; buckets a copy
    resident = 176 * 4 + (2 * 176 * 4 + 12)
    assert ddp.device_bytes == max(resident + 200, resident + grads) + grads
    assert ddp.network_bytes == pytest.approx(2 * 3 / 4 * grads)
    assert fsdp.device_bytes < ddp.device_bytes
    # FSDP at 4 ranks: two gathers of each block (bf16) and one of the root, one fp32 reduce
    assert fsdp.network_bytes == pytest.approx(0.75 * (32 + 4 * 160 + 2 * 320 + 64))
    assert offload.device_bytes < fsdp.device_bytes and offload.host_bytes > 0
    assert offload.network_bytes == fsdp.network_bytes
    assert offload.host_link_bytes == 2 * 44 * 4  # the shard in, its gradient out
