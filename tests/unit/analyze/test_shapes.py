"""FLOPs and bytes from recorded shapes, each against a hand computation (an FMA = 2 FLOPs)."""

from __future__ import annotations

from typing import Any

import pytest

from torchdoctor.analyze.shapes import (
    OP_DTYPES,
    op_bytes,
    op_dtype_code,
    op_flops_and_bytes,
    op_flops_and_output,
)

F32 = "float"


def _conv_concrete(stride: str, padding: str, dilation: str, groups: str) -> list[str]:
    # aten::conv2d(input, weight, bias, stride, padding, dilation, groups)
    return ["", "", "", stride, padding, dilation, groups]


def _conv_backward_concrete(mask: str) -> list[str]:
    # aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
    # dilation, transposed, output_padding, groups, output_mask)
    return ["", "", "", "[0]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "2", mask]


@pytest.mark.parametrize(
    ("name", "dims", "concrete", "flops", "out"),
    [
        # mm [3,4] x [4,5]: 2*3*4*5
        ("aten::mm", [[3, 4], [4, 5]], None, 120, [3, 5]),
        # addmm(bias, a, b): the bias adds nothing to the count
        ("aten::addmm", [[5], [3, 4], [4, 5], [], []], None, 120, [3, 5]),
        # bmm [2,3,4] x [2,4,5]: 2*2*3*4*5
        ("aten::bmm", [[2, 3, 4], [2, 4, 5]], None, 240, [2, 3, 5]),
        ("aten::baddbmm", [[2, 3, 5], [2, 3, 4], [2, 4, 5]], None, 240, [2, 3, 5]),
        # matmul broadcasts batch dims: [7,3,4] x [4,5] -> 2*7*3*4*5
        ("aten::matmul", [[7, 3, 4], [4, 5]], None, 840, [7, 3, 5]),
        ("aten::matmul", [[2, 1, 3, 4], [6, 4, 5]], None, 2 * 2 * 6 * 3 * 4 * 5, [2, 6, 3, 5]),
        # linear x [2,3,4], w [6,4]: 2*(2*3)*4*6
        ("aten::linear", [[2, 3, 4], [6, 4], [6]], None, 288, [2, 3, 6]),
        # conv2d x [2,4,9,11], w [6,2,3,3], stride 2, padding 1, groups 2:
        # out H (9+2-2-1)//2+1 = 5, W (11+2-2-1)//2+1 = 6; 2*N*Cout*H*W*(Cin/g)*kh*kw
        (
            "aten::conv2d",
            [[2, 4, 9, 11], [6, 2, 3, 3], [6]],
            _conv_concrete("[2, 2]", "[1, 1]", "[1, 1]", "2"),
            2 * 2 * 6 * 5 * 6 * 2 * 3 * 3,
            [2, 6, 5, 6],
        ),
        # dilation 2, no padding: out 7 - 2*(3-1) = 3 per side
        (
            "aten::convolution",
            [[1, 1, 7, 7], [1, 1, 3, 3], []],
            _conv_concrete("[1, 1]", "[0, 0]", "[2, 2]", "1"),
            2 * 9 * 9,
            [1, 1, 3, 3],
        ),
        # nothing recorded: stride 1 and "same" padding -> out 5x5
        ("aten::conv2d", [[1, 1, 5, 5], [1, 1, 3, 3]], None, 2 * 25 * 9, [1, 1, 5, 5]),
        # convolution_backward of the grouped, strided conv2d above (grad_out [2,6,5,6]):
        # grad_input and grad_weight each cost the forward's count
        (
            "aten::convolution_backward",
            [[2, 6, 5, 6], [2, 4, 9, 11], [6, 2, 3, 3]],
            _conv_backward_concrete("[True, True, False]"),
            2 * (2 * 2 * 6 * 5 * 6 * 2 * 3 * 3),
            [2, 4, 9, 11],
        ),
        # the first layer: the image needs no gradient, only grad_weight is computed
        (
            "aten::convolution_backward",
            [[2, 6, 5, 6], [2, 4, 9, 11], [6, 2, 3, 3]],
            _conv_backward_concrete("[False, True, True]"),
            2 * 2 * 6 * 5 * 6 * 2 * 3 * 3,
            [2, 4, 9, 11],
        ),
        # elementwise: a per-element count times the broadcast (largest) input's size
        ("aten::add", [[8, 1], [8, 8], []], None, 64, [8, 8]),
        ("aten::native_batch_norm", [[4, 3, 5, 5], [3], [3]], None, 6 * 300, [4, 3, 5, 5]),
        ("aten::copy_", [[4, 4], [4, 4]], None, 0, [4, 4]),
        # torch < 1.11 names: cuDNN's batch norm, its backward, a pool's backward
        ("aten::cudnn_batch_norm", [[4, 3, 5, 5], [3], [3]], None, 6 * 300, [4, 3, 5, 5]),
        (
            "aten::cudnn_batch_norm_backward",
            [[4, 3, 5, 5], [4, 3, 5, 5], [3]],
            None,
            8 * 300,
            [4, 3, 5, 5],
        ),
        (
            "aten::max_pool2d_with_indices_backward",
            [[4, 3, 2, 2], [4, 3, 4, 4]],
            None,
            2 * 192,
            [4, 3, 4, 4],
        ),
        # the legacy input-grad op (self_size, grad_output, weight): one forward's count from
        # grad_output [2,6,5,6] and weight [6,2,3,3]; its output size was not recorded
        (
            "aten::cudnn_convolution_backward_input",
            [[], [2, 6, 5, 6], [6, 2, 3, 3], [], []],
            None,
            2 * 2 * 6 * 5 * 6 * 2 * 3 * 3,
            [],
        ),
        # sdpa q [2,3,5,4], k [2,3,7,4], v [2,3,7,6]: 2*B*H*L*S*E + 2*B*H*L*S*Ev
        (
            "aten::scaled_dot_product_attention",
            [[2, 3, 5, 4], [2, 3, 7, 4], [2, 3, 7, 6]],
            None,
            2 * 2 * 3 * 5 * 7 * 4 + 2 * 2 * 3 * 5 * 7 * 6,
            [2, 3, 5, 6],
        ),
        # the flash kernel takes [B, L, H, E]: the same attention, the same count
        (
            "aten::_flash_attention_forward",
            [[2, 5, 3, 4], [2, 7, 3, 4], [2, 7, 3, 6]],
            None,
            2 * 2 * 3 * 5 * 7 * 4 + 2 * 2 * 3 * 5 * 7 * 6,
            [2, 5, 3, 6],
        ),
    ],
)
def test_flops_and_output_shape(
    name: str, dims: list[Any], concrete: Any, flops: int, out: list[int]
) -> None:
    assert op_flops_and_output(name, dims, concrete) == (flops, out)


@pytest.mark.parametrize(
    ("name", "dims"),
    [
        ("aten::embedding", [[100, 8], [10]]),  # a lookup: no FLOPs to count
        ("aten::mm", [[3, 4]]),  # one operand missing
        ("aten::bmm", [[3, 4], [4, 5]]),  # not 3-D
        ("aten::scaled_dot_product_attention", [[2, 3, 4], [2, 3, 4], [2, 3, 4]]),
        ("aten::mm", "not a list"),
        # the legacy weight-grad op: its kernel size is in no recorded tensor
        ("aten::cudnn_convolution_backward_weight", [[], [2, 6, 5, 6], [2, 4, 9, 11]]),
    ],
)
def test_unknown_or_malformed_shapes_give_nothing(name: str, dims: Any) -> None:
    assert op_flops_and_output(name, dims, None) == (None, None)


@pytest.mark.parametrize(
    ("name", "dims", "types", "expected"),
    [
        # inputs 3*4 + 4*5 floats, output 3*5 floats: (12 + 20 + 15) * 4
        ("aten::mm", [[3, 4], [4, 5]], [F32, F32], (12 + 20 + 15) * 4),
        # bf16: 2 bytes per element
        ("aten::mm", [[3, 4], [4, 5]], ["c10::BFloat16"] * 2, (12 + 20 + 15) * 2),
        # addmm: bias 5, a 12, b 20, out 15 floats
        ("aten::addmm", [[5], [3, 4], [4, 5]], [F32] * 3, (5 + 12 + 20 + 15) * 4),
        # fp16 sdpa: q 2*3*5*4=120, k 168, v 252, out 2*3*5*6=180 elements
        (
            "aten::scaled_dot_product_attention",
            [[2, 3, 5, 4], [2, 3, 7, 4], [2, 3, 7, 6]],
            ["c10::Half"] * 3,
            (120 + 168 + 252 + 180) * 2,
        ),
        # elementwise: two 8x8 double inputs, output the size of the largest input
        ("aten::add", [[8, 8], [8, 8], []], ["double", "double", "Scalar"], 3 * 64 * 8),
        # int64 indices and fp32 weight (embedding): 10 * 8 + 100 * 4, output the largest
        ("aten::embedding", [[100], [10]], [F32, "long int"], 400 + 80 + 400),
    ],
)
def test_bytes_from_shapes_and_dtypes(
    name: str, dims: list[Any], types: list[str], expected: int
) -> None:
    assert op_bytes(name, dims, types, None) == expected


def test_bytes_need_a_known_tensor() -> None:
    assert op_bytes("aten::mm", [[3, 4], [4, 5]], None, None) is None
    assert op_bytes("aten::mm", [[], []], [F32, F32], None) is None
    assert op_bytes("aten::mm", [[3, 4]], ["mystery_t"], None) is None


@pytest.mark.parametrize(
    ("types", "dtype"),
    [
        ([F32, F32], "float32"),
        (["long int", "c10::BFloat16"], "bfloat16"),  # the first floating-point input
        (["c10::Half"], "float16"),
        (["double"], "float64"),
        (["c10::Float8_e4m3fn"], "float8"),
    ],
)
def test_op_dtype_is_the_first_floating_input(types: list[str], dtype: str) -> None:
    assert OP_DTYPES[op_dtype_code(types)] == dtype


@pytest.mark.parametrize("types", [["long int", "bool"], [], None, "float", [None, 3]])
def test_op_dtype_unknown(types: Any) -> None:
    assert op_dtype_code(types) == -1


def test_flops_and_bytes_together_match_each_alone() -> None:
    dims, types = [[2, 3, 4], [6, 4], [6]], [F32, F32, F32]
    assert (
        op_flops_and_bytes("aten::linear", dims, types, None)
        == (
            op_flops_and_output("aten::linear", dims, None)[0],
            op_bytes("aten::linear", dims, types, None),
        )
        == (288, (24 + 24 + 6 + 36) * 4)
    )
    assert op_flops_and_bytes("aten::add", [[8]], [F32], None) == (8, (8 + 8) * 4)
    assert op_flops_and_bytes("aten::embedding", [[8]], [F32], None) == (None, (8 + 8) * 4)


def test_convolution_backward_matches_torch_flop_counter() -> None:
    """The estimate from a real profiler trace agrees with torch.utils.flop_counter.

    Ungrouped: for groups > 1 flop_counter's grad_weight branch drops the group factor
    (it counts 3x the forward for groups=2 where the work is 2x), so it is no reference there.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    conv = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, bias=False)
    x = torch.randn(2, 4, 9, 11, requires_grad=True)
    grad = torch.randn(2, 6, 5, 6)
    with FlopCounterMode(display=False) as counter:
        conv(x).backward(grad)
    counted = counter.get_flop_counts()["Global"]
    backward_expected = sum(v for op, v in counted.items() if "convolution_backward" in str(op))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        conv(x).backward(grad)
    events = [e for e in prof.events() if e.name == "aten::convolution_backward"]
    assert len(events) == 1
    event = events[0]
    flops, _ = op_flops_and_output(event.name, event.input_shapes, event.concrete_inputs)
    assert backward_expected > 0
    assert flops == backward_expected


def test_elementwise_ops_fall_far_below_any_ridge() -> None:
    """The counts only need to place the op: even the largest is well under 1 FLOP/byte."""
    from torchdoctor.analyze.shapes import ELEMENTWISE_FLOPS

    dims = [[64, 64], [64, 64]]
    for name in ELEMENTWISE_FLOPS:
        flops, nbytes = op_flops_and_bytes(name, dims, [F32, F32], None)
        assert flops is not None and nbytes is not None
        assert flops / nbytes < 1.0, name
