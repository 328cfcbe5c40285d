"""What kernel names say: the GPU generation, and whether matrix math runs on tensor cores.

cuBLAS, cuDNN, CUTLASS and Tensile (ROCm) name their kernels after the architecture they
were built for and the instruction they use, and every profiler version records the name, so
the names work on traces of any era, with or without `deviceProperties`:

- generation: a library ships kernels for its own and older architectures and picks among
  those the device can run, so the newest architecture any kernel names is a lower bound on
  the device's, and in practice the device's own (`volta_*`/`sm70_*` 7.0, `turing_*`/`sm75_*`
  7.5, `ampere_*`/`sm80_*` 8.0, `sm86_*` 8.6, `sm89_*` 8.9, `sm90_*`/`hopper` 9.0);
- tensor cores: the MMA instruction shape in the name (Volta `884`, Turing `1688`, Ampere
  `16816`, WMMA `161616`), CUTLASS `tensorop`/`wmma`, cuDNN/cuBLAS `xmma` and Hopper `gmma`,
  `hmma`/`imma`, and AMD's matrix cores (`mfma`, Tensile's `_MI16x16x1`-style instruction
  tag);
- except an `xmma` kernel that names SIMT fp32 math: cuBLAS and cuDNN on sm80/sm90 build
  their fp32 CUDA-core GEMMs and convolutions in the same xmma framework and say so in the
  name, by the SIMT instruction (`ffma`) or by all-fp32 operand types (`f32f32_f32f32`, where a
  TF32 tensor-core kernel reads `tf32f32_tf32f32`), e.g.
  `sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_...`;
- fp32 matrix math on the CUDA cores (tensor-core eligible under autocast): the classic
  single-precision GEMM and convolution kernels (`*sgemm*`, `*scudnn*`, cuDNN's
  `implicit_convolve_sgemm`, `wgrad_alg*`/`dgrad*` engines, Winograd and FFT convolution on
  `float`, complex `cgemm` of FFT convolution, Tensile `Cijk_*_S*` without a matrix-core tag).

The deprecated TensorBoard profiler plugin (pytorch/kineto tb_plugin) classified kernels the
same way ("Tensor Cores used" by kernel-name patterns) to recommend AMP.
"""

from __future__ import annotations

import re
from typing import Final

import numpy as np

from torchdoctor.analyze.devicetime import is_comm_kernel_name
from torchdoctor.analyze.records import KernelMix
from torchdoctor.analyze.timeline import BoolArray, Kind, Timeline

# (regex on the lower-cased name, (major, minor), generation), newest first.
_GENERATIONS: Final = (
    (re.compile(r"(?:^|[^a-z0-9])sm_?100|blackwell"), (10, 0), "Blackwell"),
    (re.compile(r"(?:^|[^a-z0-9])sm_?90|hopper"), (9, 0), "Hopper"),
    (re.compile(r"(?:^|[^a-z0-9])sm_?89|(?:^|[^a-z])ada_"), (8, 9), "Ada"),
    (re.compile(r"(?:^|[^a-z0-9])sm_?86"), (8, 6), "Ampere"),
    (re.compile(r"(?:^|[^a-z0-9])sm_?80|ampere_|cutlass_80"), (8, 0), "Ampere"),
    (re.compile(r"(?:^|[^a-z0-9])sm_?75|turing_"), (7, 5), "Turing"),
    (re.compile(r"(?:^|[^a-z0-9])sm_?70|volta_"), (7, 0), "Volta"),
)
# Matrix instructions and the libraries' names for kernels that use them.
_TENSOR_CORE: Final = re.compile(
    r"884|1688|16816|161616|tensorop|wmma|xmma|gmma|hmma|imma|mfma|_mi\d+x\d+x\d+"
)
# An xmma kernel doing fp32 math on the CUDA cores: the SIMT FMA instruction, or fp32 for
# every operand (a TF32 kernel's types read "tf32f32_tf32f32", which this does not match).
_SIMT_FP32_XMMA: Final = re.compile(r"ffma|(?:^|[^a-z0-9])f32f32_f32f32")
# Single-precision matrix math on the CUDA cores (checked after _TENSOR_CORE).
_FP32_MATH: Final = re.compile(
    r"sgemm|scudnn|cgemm|gcgemm|implicit_convolve|explicit_convolve|wgrad_alg|dgrad|"
    r"winograd|fft2d_|fft3d_|conv2d_grouped_direct|convolve_common_engine"
)
# Double precision: no tensor cores before Ampere's FP64 ones, and autocast leaves it alone.
_FP64: Final = re.compile(r"dgemm|zgemm|double|_db_|f64")
# cuDNN's and MIOpen's layout shuffles around a convolution: memory moves, not math.
_NOT_MATH: Final = re.compile(r"nchwtonhwc|nhwctonchw|transpose|reorder")
# Tensile (rocBLAS/hipBLASLt) names its GEMMs Cijk_<layout>_<types>...; S/SB = fp32 data.
_TENSILE_FP32: Final = re.compile(r"^cijk_.*?_s[bs]?_")
_ROCM: Final = re.compile(r"^cijk_|mfma|miopen")


def generation_from_names(names: list[str]) -> tuple[tuple[int, int], str, str] | None:
    """(capability, generation, the kernel name it was read from) of the newest NVIDIA
    architecture the kernel names mention; None when none does."""
    best: tuple[tuple[int, int], str, str] | None = None
    for name in names:
        lowered = name.lower()
        for pattern, capability, generation in _GENERATIONS:
            if best is not None and capability <= best[0]:
                break
            if pattern.search(lowered):
                best = (capability, generation, name)
                break
    return best


def _simt_fp32_xmma(lowered: str) -> bool:
    return "xmma" in lowered and bool(_SIMT_FP32_XMMA.search(lowered))


def uses_tensor_cores(name: str) -> bool:
    lowered = name.lower()
    return bool(_TENSOR_CORE.search(lowered)) and not _simt_fp32_xmma(lowered)


def fp32_cuda_core_math(name: str) -> bool:
    """An fp32 GEMM/convolution kernel on the CUDA cores: work autocast moves to tensor cores."""
    lowered = name.lower()
    if _FP64.search(lowered) or _NOT_MATH.search(lowered):
        return False
    if _simt_fp32_xmma(lowered):
        return True
    if _TENSOR_CORE.search(lowered):
        return False
    return bool(_FP32_MATH.search(lowered) or _TENSILE_FP32.search(lowered))


def is_rocm_kernel(name: str) -> bool:
    return bool(_ROCM.search(name.lower()))


def kernel_mix(tl: Timeline, selected: BoolArray) -> KernelMix | None:
    """Kernel time by what runs it, over the selected device events; None without kernels."""
    kernels = np.flatnonzero(tl.mask(Kind.KERNEL) & selected & ~tl.name_mask(is_comm_kernel_name))
    if kernels.size == 0:
        return None
    per_name = np.bincount(tl.name_id[kernels], weights=tl.dur[kernels], minlength=len(tl.names))
    used = np.flatnonzero(per_name > 0).tolist()
    total = float(per_name.sum())
    tensor = sum(per_name[i] for i in used if uses_tensor_cores(tl.names[i]))
    fp32 = sum(per_name[i] for i in used if fp32_cuda_core_math(tl.names[i]))
    names = [tl.names[i] for i in used]
    inferred = generation_from_names(names)
    rocm = any(is_rocm_kernel(n) for n in names)
    return KernelMix(
        kernel_us=total,
        tensor_core_us=float(tensor),
        fp32_cuda_core_math_us=float(fp32),
        generation=None if inferred is None or rocm else inferred[1],
        capability=None if inferred is None or rocm else inferred[0],
        generation_evidence=None if inferred is None or rocm else inferred[2][:120],
        vendor="amd" if rocm else "nvidia" if inferred is not None else None,
    )
