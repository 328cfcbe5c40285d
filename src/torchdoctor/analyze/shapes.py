"""FLOPs and bytes moved of an operator, estimated from the shapes the profiler recorded.

Used when a trace has `record_shapes=True` but no `flops` field on the op (the profiler only
writes `flops` with `with_flops=True`, and only for a few ops). Formulas count a fused
multiply-add as 2 FLOPs, as torch.utils.flop_counter does:

- mm [M,K]x[K,N]: 2*M*K*N; addmm/linear add the bias as nothing (it is O(M*N));
- bmm/baddbmm [B,M,K]x[B,K,N]: 2*B*M*K*N; matmul: the same over broadcast batch dims;
- convolution: 2 * N * C_out * prod(out spatial) * C_in/groups * prod(kernel), with the
  output size from stride/padding/dilation when the trace recorded them ("Concrete Inputs"),
  else stride 1 and "same" padding (an estimate, flagged by nothing better being known);
- convolution_backward(grad_out, input, weight, ...): the forward's count (read from grad_out's
  spatial size, which is the forward output's) once for grad_input and once for grad_weight,
  each only when its entry of the recorded output_mask is True (flop_counter's
  conv_backward_flop: both are a convolution of the same size as the forward);
- the split backward of torch < 1.11 (aten::cudnn_convolution_backward_input/_weight, the
  children of aten::cudnn_convolution_backward): the input-grad op counts one forward from
  its grad_output and weight; the weight-grad op records no tensor holding the kernel size
  and takes its count from its parent (`nested_costs`);
- scaled dot product attention, q [B,H,L,E], k [B,H,S,E], v [B,H,S,Ev] ([B,L,H,E] etc. for
  the _flash/_efficient_attention_forward kernels): 2*B*H*L*S*E (q k^T) + 2*B*H*L*S*Ev
  (attn v), forward only and with no discount for a causal mask, as flop_counter's sdpa rule.

- elementwise, normalization and copy ops (ELEMENTWISE_FLOPS): a per-element count times the
  largest input's size (the output's size under broadcasting). The counts are orders of
  magnitude (an add is 1; a batch norm's statistics, normalization and affine about 6); they
  only have to place the op on the roofline, and there they cannot be wrong enough to matter:
  at 4 bytes per fp32 element read and written, even 8 FLOPs per element is an intensity
  under 1 FLOP/byte, an order of magnitude below any ridge point (CPU here: ~10 FLOP/byte;
  A100: fp32 19.5 TFLOP/s over 2 TB/s, ~10), so they are memory-bound unless too small to
  be anything but overhead. Without them such ops had no class at all ("unknown").

Bytes moved: the sum of the input tensors' sizes plus the output's (known for the ops above;
for any other op, the largest input, the usual size of an elementwise/reduction output). This
is the DRAM traffic a perfectly cached kernel would need, the denominator of arithmetic
intensity in the roofline model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

# Bytes per element of the dtype names the profiler writes in "Input type".
DTYPE_BYTES: dict[str, int] = {
    "double": 8,
    "float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "long int": 8,
    "long": 8,
    "int64_t": 8,
    "int": 4,
    "short int": 2,
    "short": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::complex<c10::Half>": 4,
}

# Floating-point "Input type" names -> the dtype keys ceilings use for their peaks
# (`Ceilings.peak_flops`). An op's dtype is that of its first floating-point input.
DTYPE_KEYS: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "c10::Half": "float16",
    "c10::BFloat16": "bfloat16",
    "c10::Float8_e4m3fn": "float8",
    "c10::Float8_e5m2": "float8",
    "c10::Float8_e4m3fnuz": "float8",
    "c10::Float8_e5m2fnuz": "float8",
}
# The op dtypes a `Timeline` records, by code (its `dtype` column; -1 = not known).
OP_DTYPES: tuple[str, ...] = ("float32", "float64", "float16", "bfloat16", "float8")
_DTYPE_CODES = {name: OP_DTYPES.index(key) for name, key in DTYPE_KEYS.items()}

MM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::_addmm_activation"})
BMM_OPS = frozenset({"aten::bmm", "aten::baddbmm"})
CONV_OPS = frozenset(
    {
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::convolution",
        "aten::_convolution",
        "aten::cudnn_convolution",
        "aten::miopen_convolution",
        "aten::mkldnn_convolution",
    }
)
CONV_BACKWARD_OPS = frozenset({"aten::convolution_backward"})
# The backends' own backward ops, as torch < 1.11 traces record them (the unified
# aten::convolution_backward came in 1.11): inputs (input, grad_output, weight, ...).
LEGACY_CONV_BACKWARD_OPS = frozenset(
    {
        "aten::cudnn_convolution_backward",
        "aten::miopen_convolution_backward",
        "aten::mkldnn_convolution_backward",
    }
)
# The split backward ops of torch < 1.11, children of the legacy op above:
# *_backward_input(self_size, grad_output, weight, ...) and
# *_backward_weight(weight_size, grad_output, self, ...). The profiler records no shape for
# an int-list argument (self_size, weight_size), so the input-grad op's count comes from
# grad_output and weight; the weight-grad op's cannot (its kernel size is in no tensor it
# takes) and is taken from its enclosing legacy op (`inherit_weight_grad_flops`).
LEGACY_CONV_BACKWARD_INPUT_OPS = frozenset(
    {
        "aten::cudnn_convolution_backward_input",
        "aten::miopen_convolution_backward_input",
    }
)
LEGACY_CONV_BACKWARD_WEIGHT_OPS = frozenset(
    {
        "aten::cudnn_convolution_backward_weight",
        "aten::miopen_convolution_backward_weight",
    }
)
#: Gradients a legacy convolution backward is counted for: its output_mask is not
#: recorded, and autograd asks for both when both input and weight need them.
LEGACY_CONV_BACKWARD_GRADS = 2
#: Index of output_mask among aten::convolution_backward's inputs.
CONV_BACKWARD_MASK_INDEX = 10
#: FLOPs per output element of elementwise, normalization and copy ops (see the module doc).
ELEMENTWISE_FLOPS: dict[str, float] = {
    **dict.fromkeys(("aten::copy_", "aten::_to_copy", "aten::fill_", "aten::zero_"), 0.0),
    **dict.fromkeys(
        (
            "aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::mul", "aten::mul_",
            "aten::div", "aten::div_", "aten::neg", "aten::relu", "aten::relu_",
            "aten::clamp_min", "aten::clamp_min_", "aten::threshold_backward",
            "aten::maximum", "aten::minimum", "aten::where", "aten::sqrt", "aten::rsqrt",
        ),
        1.0,
    ),
    **dict.fromkeys(("aten::addcmul_", "aten::addcdiv_", "aten::lerp_"), 2.0),
    **dict.fromkeys(("aten::_softmax", "aten::_log_softmax", "aten::sigmoid", "aten::silu"), 4.0),
    # Reductions and pooling: about one operation per input element (a 3x3 max pool at
    # stride 2 compares 9 values per output, a quarter as many outputs as inputs: ~2).
    **dict.fromkeys(("aten::sum", "aten::mean", "aten::amax", "aten::max"), 1.0),
    **dict.fromkeys(
        (
            "aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward",
            "aten::avg_pool2d", "aten::avg_pool2d_backward", "aten::_adaptive_avg_pool2d",
            "aten::_adaptive_avg_pool2d_backward",
        ),
        2.0,
    ),
    **dict.fromkeys(
        ("aten::_softmax_backward_data", "aten::_log_softmax_backward_data"), 4.0
    ),
    # The backends' batch norms (the ops torch < 1.11 and cuDNN/MIOpen paths record).
    **dict.fromkeys(
        (
            "aten::native_batch_norm", "aten::native_layer_norm", "aten::cudnn_batch_norm",
            "aten::miopen_batch_norm", "aten::_batch_norm_impl_index", "aten::batch_norm",
        ),
        6.0,
    ),
    **dict.fromkeys(("aten::gelu", "aten::tanh", "aten::exp", "aten::log"), 8.0),
    **dict.fromkeys(
        (
            "aten::native_batch_norm_backward", "aten::native_layer_norm_backward",
            "aten::cudnn_batch_norm_backward", "aten::miopen_batch_norm_backward",
        ),
        8.0,
    ),
}  # fmt: skip
SDPA_OPS = frozenset(
    {
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_flash_attention_forward",
        "aten::_efficient_attention_forward",
    }
)
# The SDPA kernels whose inputs are [B, L, H, E] (sequence before heads), as
# aten::_flash_attention_forward / _efficient_attention_forward record them.
SEQ_FIRST_SDPA_OPS = frozenset(
    {"aten::_flash_attention_forward", "aten::_efficient_attention_forward"}
)


def _tensor_dims(dims: Any) -> list[list[int]]:
    """The recorded dims, keeping only flat integer lists (tensors); others become []."""
    out: list[list[int]] = []
    for d in dims if isinstance(dims, list) else []:
        if isinstance(d, list) and all(isinstance(x, int) for x in d):
            out.append(d)
        else:
            out.append([])
    return out


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape) if shape else 0


def _int_list(text: Any) -> list[int] | None:
    """Parse a concrete input like "[2, 2]" or "2"; None if absent or not integers."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return [int(x) for x in text.strip("[] ").split(",") if x.strip()]
    except ValueError:
        return None


def _matmul_flops(a: list[int], b: list[int]) -> tuple[float, list[int]] | None:
    if len(a) < 1 or len(b) < 1:
        return None
    a2 = [1, *a] if len(a) == 1 else a
    b2 = [*b, 1] if len(b) == 1 else b
    m, k = a2[-2], a2[-1]
    n = b2[-1]
    batch_a, batch_b = a2[:-2], b2[:-2]
    width = max(len(batch_a), len(batch_b))
    batch_a = [1] * (width - len(batch_a)) + batch_a
    batch_b = [1] * (width - len(batch_b)) + batch_b
    batch = [max(x, y) for x, y in zip(batch_a, batch_b, strict=True)]
    return 2.0 * math.prod(batch) * m * k * n, [*batch, m, n]


def _conv_flops(dims: list[list[int]], concrete: Any) -> tuple[float, list[int]] | None:
    x, w = dims[0], dims[1]
    if len(x) < 3 or len(w) != len(x):
        return None
    spatial = len(x) - 2
    conc = concrete if isinstance(concrete, list) else []
    stride = _int_list(conc[3]) if len(conc) > 3 else None
    padding = _int_list(conc[4]) if len(conc) > 4 else None
    dilation = _int_list(conc[5]) if len(conc) > 5 else None
    out_spatial = []
    for i in range(spatial):
        size, kern = x[2 + i], w[2 + i]
        s = stride[min(i, len(stride) - 1)] if stride else 1
        p = padding[min(i, len(padding) - 1)] if padding else (kern - 1) // 2
        d = dilation[min(i, len(dilation) - 1)] if dilation else 1
        out_spatial.append(max(1, (size + 2 * p - d * (kern - 1) - 1) // max(s, 1) + 1))
    n, c_out, c_in_per_group = x[0], w[0], w[1]
    flops = 2.0 * n * c_out * math.prod(out_spatial) * c_in_per_group * math.prod(w[2:])
    return flops, [n, c_out, *out_spatial]


def _conv_backward_flops(dims: list[list[int]], concrete: Any) -> tuple[float, list[int]] | None:
    grad_out, x, w = dims[0], dims[1], dims[2]
    if len(x) < 3 or len(w) != len(x) or len(grad_out) != len(x):
        return None
    # Forward FLOPs: 2 * N * C_out * prod(out spatial) * C_in/groups * prod(kernel).
    forward = 2.0 * x[0] * w[0] * math.prod(grad_out[2:]) * w[1] * math.prod(w[2:])
    conc = concrete if isinstance(concrete, list) else []
    mask_text = conc[CONV_BACKWARD_MASK_INDEX] if len(conc) > CONV_BACKWARD_MASK_INDEX else None
    if isinstance(mask_text, str) and mask_text.strip("[] "):
        mask = [m.strip() == "True" for m in mask_text.strip("[] ").split(",")]
    else:
        mask = [True, True]  # not recorded: autograd asks for both when both need grads
    grads = int(mask[0]) + int(len(mask) > 1 and mask[1])
    # Output for the bytes estimate: grad_input, the same size as the input.
    return forward * grads, list(x)


def _conv_backward_input_flops(dims: list[list[int]]) -> tuple[float, list[int]] | None:
    """A legacy *_backward_input(self_size, grad_output, weight): one forward's count."""
    grad_out, w = dims[1], dims[2]
    if len(grad_out) < 3 or len(w) != len(grad_out):
        return None
    forward = 2.0 * grad_out[0] * w[0] * math.prod(grad_out[2:]) * w[1] * math.prod(w[2:])
    # The output (grad_input) has the forward input's size, which self_size held and the
    # profiler did not record: the largest input stands for it, as for any other op.
    return forward, []


def _elementwise_flops(name: str, dims: list[list[int]]) -> tuple[float, list[int]] | None:
    shapes = [d for d in dims if d]
    if not shapes:
        return None
    largest = max(shapes, key=_numel)
    return ELEMENTWISE_FLOPS[name] * _numel(largest), list(largest)


def _sdpa_flops(name: str, dims: list[list[int]]) -> tuple[float, list[int]] | None:
    q, k, v = dims[0], dims[1], dims[2]
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None
    if name in SEQ_FIRST_SDPA_OPS:  # [B, L, H, E]: the layout the flash kernels take
        b, length, h, e = q
        s, ev = k[1], v[3]
        return 2.0 * b * h * length * s * e + 2.0 * b * h * length * s * ev, [b, length, h, ev]
    b, h, length, e = q
    s, ev = k[2], v[3]
    return 2.0 * b * h * length * s * e + 2.0 * b * h * length * s * ev, [b, h, length, ev]


def _flops_and_output(
    name: str, dims: list[list[int]], concrete: Any
) -> tuple[float, list[int]] | None:
    result: tuple[float, list[int]] | None = None
    try:
        if name in MM_OPS and len(dims) >= 2:
            a, b = (dims[1], dims[2]) if name != "aten::mm" and len(dims) >= 3 else dims[:2]
            result = _matmul_flops(a, b) if len(a) == 2 and len(b) == 2 else None
        elif name in BMM_OPS and len(dims) >= 2:
            a, b = (dims[1], dims[2]) if name == "aten::baddbmm" and len(dims) >= 3 else dims[:2]
            result = _matmul_flops(a, b) if len(a) == 3 and len(b) == 3 else None
        elif name == "aten::matmul" and len(dims) >= 2:
            result = _matmul_flops(dims[0], dims[1])
        elif name == "aten::linear" and len(dims) >= 2 and dims[0] and len(dims[1]) == 2:
            x, w = dims[0], dims[1]
            result = 2.0 * _numel(x[:-1]) * x[-1] * w[0], [*x[:-1], w[0]]
        elif name in CONV_OPS and len(dims) >= 2:
            result = _conv_flops(dims, concrete)
        elif name in CONV_BACKWARD_OPS and len(dims) >= 3:
            result = _conv_backward_flops(dims, concrete)
        elif name in LEGACY_CONV_BACKWARD_OPS and len(dims) >= 3:
            # Reordered to (grad_output, input, weight); their output_mask is not recorded
            # at the unified op's index, so both gradients are assumed.
            # LEGACY_CONV_BACKWARD_GRADS says so to the ops nested in them.
            result = _conv_backward_flops([dims[1], dims[0], dims[2]], None)
        elif name in LEGACY_CONV_BACKWARD_INPUT_OPS and len(dims) >= 3:
            result = _conv_backward_input_flops(dims)
        elif name in SDPA_OPS and len(dims) >= 3:
            result = _sdpa_flops(name, dims)
        elif name in ELEMENTWISE_FLOPS:
            result = _elementwise_flops(name, dims)
    except (IndexError, TypeError, ValueError):
        result = None
    return result


def _bytes(dims: list[list[int]], types_raw: Any, out_shape: list[int] | None) -> float | None:
    types = types_raw if isinstance(types_raw, list) else []
    sizes: list[int] = []
    itemsize = 0
    for i, shape in enumerate(dims):
        dtype = types[i] if i < len(types) and isinstance(types[i], str) else ""
        per = DTYPE_BYTES.get(dtype)
        if per is None or not shape:
            continue
        itemsize = itemsize or per
        sizes.append(_numel(shape) * per)
    if not sizes:
        return None
    out = _numel(out_shape) * itemsize if out_shape else max(sizes)
    return float(sum(sizes) + out)


def op_flops_and_output(
    name: str, dims_raw: Any, concrete: Any
) -> tuple[float | None, list[int] | None]:
    """FLOPs and output shape of a common compute op, (None, None) for any other op."""
    result = _flops_and_output(name, _tensor_dims(dims_raw), concrete)
    return (None, None) if result is None else result


def op_bytes(name: str, dims_raw: Any, types_raw: Any, concrete: Any) -> float | None:
    """Estimated bytes read + written by an op; None when no input tensor was recorded."""
    return op_flops_and_bytes(name, dims_raw, types_raw, concrete)[1]


def op_flops_and_bytes(
    name: str, dims_raw: Any, types_raw: Any, concrete: Any
) -> tuple[float | None, float | None]:
    """`op_flops_and_output`'s FLOPs and `op_bytes`, parsing the shapes once."""
    dims = _tensor_dims(dims_raw)
    result = _flops_and_output(name, dims, concrete)
    flops, out_shape = (None, None) if result is None else result
    return flops, _bytes(dims, types_raw, out_shape)


def op_dtype_code(types_raw: Any) -> int:
    """Index in OP_DTYPES of the op's first floating-point input's dtype; -1 if none known."""
    for dtype in types_raw if isinstance(types_raw, list) else []:
        code = _DTYPE_CODES.get(dtype) if isinstance(dtype, str) else None
        if code is not None:
            return code
    return -1
