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

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from torchdoctor.core.env import Ceilings

TERA = 1e12

# Datasheet titles, cited in each record's `method["reference"]`.
_A100 = "NVIDIA A100 Tensor Core GPU datasheet (2021), dense figures"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet (2023), dense figures"
_V100 = "NVIDIA Tesla V100 GPU datasheet (2020), SXM2"
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


# (substrings that must all appear in the upper-cased device name, model, FLOP/s per dtype,
# bytes/s, reference), most specific first. dtype keys are those of measured ceilings
# ("float32", "bfloat16", "float16") plus "float64", "tf32" and "float8".
_TABLE: tuple[tuple[tuple[str, ...], str, dict[str, float], float, str], ...] = (
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
    # (40GB), HBM2e 2,039 GB/s (80GB SXM).
    (("A100", "40GB"), "A100 40GB",
     {"float64": 19.5 * TERA, "float32": 19.5 * TERA, "tf32": 156 * TERA,
      "bfloat16": 312 * TERA, "float16": 312 * TERA}, 1.555e12, _A100),
    (("A100",), "A100 80GB",
     {"float64": 19.5 * TERA, "float32": 19.5 * TERA, "tf32": 156 * TERA,
      "bfloat16": 312 * TERA, "float16": 312 * TERA}, 2.039e12, _A100),
    # V100 SXM2: FP64 7.8 TF (no FP64 tensor cores), FP32 15.7 TF, FP16 tensor 125 TF,
    # HBM2 900 GB/s.
    (("V100",), "V100",
     {"float64": 7.8 * TERA, "float32": 15.7 * TERA, "float16": 125 * TERA}, 0.9e12, _V100),
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

    upper = device_name.upper()
    for needles, model, flops, bandwidth, reference in _TABLE:
        if all(n in upper for n in needles):
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
    "Hopper": "H100 SXM",
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
