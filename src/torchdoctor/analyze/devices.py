"""Datasheet ceilings of the accelerators traces come from, for traces from another machine.

The measured ceilings of this machine come from `torchdoctor env` (`torchdoctor.core.env`);
a trace recorded elsewhere is judged against the vendor datasheet of the device it names in
`deviceProperties`, as a `Ceilings` record with `source="datasheet"`. Like measured ceilings,
the peaks are matmul peaks: dense (no sparsity), on the tensor/matrix cores where the
datasheet lists them (cuBLAS runs FP64 GEMMs on A100/H100 FP64 tensor cores; an FP32 GEMM
runs on the CUDA cores unless TF32 is allowed, the "tf32" entry). Per-row figures and the
datasheet cited are beside each table entry below.

ROCm often reports a generic "AMD Radeon Graphics" name; such devices stay unknown.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from torchdoctor.core.env import Ceilings

TERA = 1e12

# Datasheet titles, cited in each record's `method["reference"]`.
_A100 = "NVIDIA A100 Tensor Core GPU datasheet (2021), dense figures"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet (2023), dense figures"
_V100 = "NVIDIA Tesla V100 GPU datasheet (2020), SXM2"
_H100_NVL = "NVIDIA H100 Tensor Core GPU datasheet (2024), H100 NVL column, dense figures"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet (2024), dense figures"
_GH200 = "NVIDIA GH200 Grace Hopper Superchip datasheet (2024), GPU figures, dense"
_B200 = "NVIDIA HGX B200 specifications (2025), per-GPU figures, dense"
_L4 = "NVIDIA L4 Tensor Core GPU datasheet (2023), dense figures"
_L40S = "NVIDIA L40S GPU datasheet (2023), dense figures"
_T4 = "NVIDIA T4 Tensor Core GPU datasheet (2019)"
_MI250 = "AMD Instinct MI250X / MI250 accelerator product pages, peak matrix figures"
_MI300 = "AMD Instinct MI300X accelerator datasheet, dense figures"


class CeilingsLike(Protocol):
    """The fields of `torchdoctor.core.env.Ceilings` the analyzer reads."""

    @property
    def device(self) -> str: ...
    @property
    def device_name(self) -> str | None: ...
    @property
    def peak_flops(self) -> dict[str, float]: ...
    @property
    def mem_bandwidth_bytes_per_s(self) -> float | None: ...
    @property
    def source(self) -> str: ...


# The peaks of one chip at one clock and power, shared by the parts that differ only in their
# memory: GH200 and H200 SXM (FP64 tensor 67 TF, FP32 67 TF, TF32 989* TF, BF16/FP16
# 1,979* TF, FP8 3,958* TF), H200 NVL and H100 NVL (FP64 tensor 60 TF, FP32 60 TF, TF32 835*
# TF, BF16/FP16 1,671* TF, FP8 3,341* TF), and the A100s (FP64 tensor 19.5 TF, FP32 19.5 TF,
# TF32 156 TF, BF16/FP16 312 TF). Dense figures, as below.
_HOPPER_SXM: dict[str, float] = {
    "float64": 67 * TERA,
    "float32": 67 * TERA,
    "tf32": 494.5 * TERA,
    "bfloat16": 989.5 * TERA,
    "float16": 989.5 * TERA,
    "float8": 1979 * TERA,
}
_HOPPER_NVL: dict[str, float] = {
    "float64": 60 * TERA,
    "float32": 60 * TERA,
    "tf32": 417.5 * TERA,
    "bfloat16": 835.5 * TERA,
    "float16": 835.5 * TERA,
    "float8": 1670.5 * TERA,
}
_A100_PEAKS: dict[str, float] = {
    "float64": 19.5 * TERA,
    "float32": 19.5 * TERA,
    "tf32": 156 * TERA,
    "bfloat16": 312 * TERA,
    "float16": 312 * TERA,
}

# (words that must all appear in the upper-cased device name, model, FLOP/s per dtype,
# bytes/s, reference), most specific first. A word is a run of letters and digits, so "L4"
# is not read in "L40S" nor "H200" in "GH200". dtype keys are those of measured ceilings
# ("float32", "bfloat16", "float16") plus "float64", "tf32" and "float8". Datasheets print
# tensor-core figures with 2:4 sparsity (marked *); the dense figure, half of it, is the one
# a dense matmul can reach, and the one given here.
_TABLE: tuple[tuple[tuple[str, ...], str, dict[str, float], float, str], ...] = (
    # GH200 (Hopper GPU of the superchip): FP64 tensor 67 TF, FP32 67 TF, TF32 989* TF,
    # BF16/FP16 1,979* TF, FP8 3,958* TF; HBM3 96 GB at 4 TB/s, or HBM3e 144 GB at 4.9 TB/s.
    (("GH200", "144G"), "GH200 144GB HBM3e", _HOPPER_SXM, 4.9e12, _GH200),
    (("GH200",), "GH200 96GB HBM3", _HOPPER_SXM, 4.0e12, _GH200),
    # H200 NVL: FP64 tensor 60 TF, FP32 60 TF, TF32 835* TF, BF16/FP16 1,671* TF,
    # FP8 3,341* TF; HBM3e 141 GB at 4.8 TB/s.
    (("H200", "NVL"), "H200 NVL", _HOPPER_NVL, 4.8e12, _H200),
    # H200 SXM: FP64 tensor 67 TF, FP32 67 TF, TF32 989* TF, BF16/FP16 1,979* TF,
    # FP8 3,958* TF; HBM3e 141 GB at 4.8 TB/s.
    (("H200",), "H200 SXM", _HOPPER_SXM, 4.8e12, _H200),
    # H100 NVL (one GPU of the pair): FP64 tensor 60 TF, FP32 60 TF, TF32 835* TF,
    # BF16/FP16 1,671* TF, FP8 3,341* TF; HBM3 94 GB at 3.9 TB/s.
    (("H100", "NVL"), "H100 NVL", _HOPPER_NVL, 3.9e12, _H100_NVL),
    # H100 PCIe: FP64 tensor 51 TF, FP32 51 TF, TF32 378 TF, BF16/FP16 756.5 TF, FP8 1,513 TF,
    # HBM2e 2.0 TB/s.
    (("H100", "PCIE"), "H100 PCIe",
     {"float64": 51 * TERA, "float32": 51 * TERA, "tf32": 378 * TERA,
      "bfloat16": 756.5 * TERA, "float16": 756.5 * TERA, "float8": 1513 * TERA}, 2.0e12, _H100),
    # H100 SXM: FP64 tensor 67 TF, FP32 67 TF, TF32 494.7 TF, BF16/FP16 989.4 TF, FP8 1,978.9 TF,
    # HBM3 3.35 TB/s.
    (("H100",), "H100 SXM",
     {"float64": 67 * TERA, "float32": 67 * TERA, "tf32": 494.7 * TERA,
      "bfloat16": 989.4 * TERA, "float16": 989.4 * TERA, "float8": 1978.9 * TERA}, 3.35e12,
     _H100),
    # A100: FP64 tensor 19.5 TF, FP32 19.5 TF, TF32 156 TF, BF16/FP16 312 TF; HBM2 1,555 GB/s
    # (40GB), HBM2e 1,935 GB/s (80GB PCIe), HBM2e 2,039 GB/s (80GB SXM): the datasheet's
    # memory bandwidth row, one column per form factor.
    (("A100", "40GB"), "A100 40GB", _A100_PEAKS, 1.555e12, _A100),
    (("A100", "PCIE"), "A100 80GB PCIe", _A100_PEAKS, 1.935e12, _A100),
    (("A100",), "A100 80GB", _A100_PEAKS, 2.039e12, _A100),
    # V100 SXM2: FP64 7.8 TF (no FP64 tensor cores), FP32 15.7 TF, FP16 tensor 125 TF,
    # HBM2 900 GB/s.
    (("V100",), "V100",
     {"float64": 7.8 * TERA, "float32": 15.7 * TERA, "float16": 125 * TERA}, 0.9e12, _V100),
    # B200 (HGX B200, per GPU): FP64/FP64 tensor 37 TF, FP32 75 TF, TF32 2.2* PF,
    # FP16/BF16 4.5* PF, FP8 9* PF; HBM3e 180 GB at 7.7 TB/s.
    (("B200",), "B200",
     {"float64": 37 * TERA, "float32": 75 * TERA, "tf32": 1100 * TERA,
      "bfloat16": 2250 * TERA, "float16": 2250 * TERA, "float8": 4500 * TERA}, 7.7e12, _B200),
    # L40S: FP32 91.6 TF, TF32 183 TF (366*), BF16/FP16 362.05 TF (733*), FP8 733 TF (1,466*);
    # GDDR6 48 GB at 864 GB/s. FP64 is not a datasheet figure (1/64 rate): not listed.
    (("L40S",), "L40S",
     {"float32": 91.6 * TERA, "tf32": 183 * TERA, "bfloat16": 362.05 * TERA,
      "float16": 362.05 * TERA, "float8": 733 * TERA}, 0.864e12, _L40S),
    # L4: FP32 30.3 TF, TF32 120* TF, BF16/FP16 242* TF, FP8 485* TF; GDDR6 24 GB at 300 GB/s.
    (("L4",), "L4",
     {"float32": 30.3 * TERA, "tf32": 60 * TERA, "bfloat16": 121 * TERA,
      "float16": 121 * TERA, "float8": 242.5 * TERA}, 0.3e12, _L4),
    # T4: FP32 8.1 TF, FP16 tensor (mixed precision) 65 TF, GDDR6 320 GB/s.
    (("T4",), "T4", {"float32": 8.1 * TERA, "float16": 65 * TERA}, 0.32e12, _T4),
    # MI250X: FP64 and FP32 matrix 95.7 TF, FP16/BF16 383 TF, HBM2e 3.2 TB/s.
    (("MI250X",), "MI250X",
     {"float64": 95.7 * TERA, "float32": 95.7 * TERA, "bfloat16": 383 * TERA,
      "float16": 383 * TERA}, 3.2e12, _MI250),
    # MI250: FP64 and FP32 matrix 90.5 TF, FP16/BF16 362.1 TF, HBM2e 3.2 TB/s.
    (("MI250",), "MI250",
     {"float64": 90.5 * TERA, "float32": 90.5 * TERA, "bfloat16": 362.1 * TERA,
      "float16": 362.1 * TERA}, 3.2e12, _MI250),
    # MI300X: FP64 and FP32 matrix 163.4 TF, FP16/BF16 1,307.4 TF, FP8 2,614.9 TF, HBM3 5.3 TB/s.
    (("MI300X",), "MI300X",
     {"float64": 163.4 * TERA, "float32": 163.4 * TERA, "bfloat16": 1307.4 * TERA,
      "float16": 1307.4 * TERA, "float8": 2614.9 * TERA}, 5.3e12, _MI300),
)  # fmt: skip


def datasheet_ceilings(device_name: str | None) -> Ceilings | None:
    """Datasheet `Ceilings` of the named device, or None when it is not in the table.

    `device` is "cuda" (ROCm builds expose AMD GPUs as "cuda" too), `device_name` the name
    the trace gave, and `method` holds the model matched and the datasheet cited.
    """
    if not device_name:
        return None
    # Imported here: building core.env's record classes costs ~10 ms of start-up, which a
    # trace from no known device does not need.
    from torchdoctor.core.env import Ceilings

    words = set(re.split(r"[^A-Z0-9]+", device_name.upper()))
    for needles, model, flops, bandwidth, reference in _TABLE:
        if all(n in words for n in needles):
            return Ceilings(
                device="cuda",
                device_name=device_name,
                peak_flops=dict(flops),
                mem_bandwidth_bytes_per_s=bandwidth,
                source="datasheet",
                method={"model": model, "reference": reference},
            )
    return None


#: The part whose datasheet stands for a GPU generation read from kernel names (a trace
#: without deviceProperties): the data-center part of each generation, the one training
#: traces most often come from. The ceilings say it was inferred.
GENERATION_PARTS: dict[str, str] = {
    "Volta": "Tesla V100",
    "Turing": "Tesla T4",
    "Ampere": "A100-SXM4-80GB",
    "Ada": "NVIDIA L40S",
    "Hopper": "H100 SXM",
    "Blackwell": "NVIDIA B200",
}


def datasheet_for_generation(generation: str | None) -> Ceilings | None:
    """Datasheet ceilings of the representative part of `generation`, labelled as inferred
    (`method["inferred"]`); None for a generation without one."""
    part = GENERATION_PARTS.get(generation or "")
    sheet = datasheet_ceilings(part)
    if sheet is None:
        return None
    method = {**sheet.method, "inferred": f"{generation} (from kernel names)"}
    return sheet.model_copy(update={"device_name": None, "method": method})
