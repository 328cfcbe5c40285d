"""Datasheet ceilings of the accelerators traces come from, for traces from another machine.

The measured ceilings of this machine come from `torchdoctor env` (`torchdoctor.core.env`);
a trace recorded elsewhere is judged against the vendor datasheet of the device it names in
`deviceProperties`. Dense (no sparsity) peak FLOP/s per dtype and peak memory bandwidth:

- NVIDIA A100: "NVIDIA A100 Tensor Core GPU" datasheet (2021): FP64 9.7 TF, FP32 19.5 TF,
  TF32 156 TF, BF16/FP16 312 TF; HBM2e 2,039 GB/s (80GB SXM), 1,555 GB/s (40GB).
- NVIDIA H100: "NVIDIA H100 Tensor Core GPU" datasheet (2023): SXM FP64 34 TF, FP32 67 TF,
  TF32 494.7 TF, BF16/FP16 989.4 TF, FP8 1,978.9 TF, HBM3 3.35 TB/s; PCIe FP32 51 TF,
  BF16/FP16 756.5 TF, 2.0 TB/s.
- NVIDIA V100 SXM2: "NVIDIA Tesla V100" datasheet: FP64 7.8 TF, FP32 15.7 TF, FP16 125 TF,
  900 GB/s.
- AMD Instinct MI250X / MI250: AMD product pages: MI250X FP64/FP32 vector 47.9 TF, FP32 matrix
  95.7 TF, FP16/BF16 383 TF; MI250 FP32 matrix 90.5 TF, FP16/BF16 362.1 TF; both 3.2 TB/s.
- AMD Instinct MI300X: AMD datasheet: FP32 matrix 163.4 TF, FP16/BF16 1,307.4 TF, FP8
  2,614.9 TF, 5.3 TB/s.

ROCm often reports a generic "AMD Radeon Graphics" name; such devices stay unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

TERA = 1e12


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


@dataclass(frozen=True)
class DatasheetCeilings:
    """Ceilings of a device from its datasheet (same fields as core.env.Ceilings)."""

    device: str
    device_name: str | None
    peak_flops: dict[str, float] = field(default_factory=dict)
    mem_bandwidth_bytes_per_s: float | None = None
    source: str = "datasheet"


# (substrings that must all appear in the upper-cased device name, label, flops, bytes/s),
# most specific first.
_TABLE: tuple[tuple[tuple[str, ...], str, dict[str, float], float], ...] = (
    (("H100", "PCIE"), "H100 PCIe",
     {"float64": 26 * TERA, "float32": 51 * TERA, "bfloat16": 756.5 * TERA,
      "float16": 756.5 * TERA}, 2.0e12),
    (("H100",), "H100 SXM",
     {"float64": 34 * TERA, "float32": 67 * TERA, "tf32": 494.7 * TERA,
      "bfloat16": 989.4 * TERA, "float16": 989.4 * TERA, "float8": 1978.9 * TERA}, 3.35e12),
    (("A100", "40GB"), "A100 40GB",
     {"float64": 9.7 * TERA, "float32": 19.5 * TERA, "tf32": 156 * TERA,
      "bfloat16": 312 * TERA, "float16": 312 * TERA}, 1.555e12),
    (("A100",), "A100 80GB",
     {"float64": 9.7 * TERA, "float32": 19.5 * TERA, "tf32": 156 * TERA,
      "bfloat16": 312 * TERA, "float16": 312 * TERA}, 2.039e12),
    (("V100",), "V100",
     {"float64": 7.8 * TERA, "float32": 15.7 * TERA, "float16": 125 * TERA}, 0.9e12),
    (("MI250X",), "MI250X",
     {"float64": 47.9 * TERA, "float32": 95.7 * TERA, "bfloat16": 383 * TERA,
      "float16": 383 * TERA}, 3.2e12),
    (("MI250",), "MI250",
     {"float64": 45.3 * TERA, "float32": 90.5 * TERA, "bfloat16": 362.1 * TERA,
      "float16": 362.1 * TERA}, 3.2e12),
    (("MI300X",), "MI300X",
     {"float32": 163.4 * TERA, "bfloat16": 1307.4 * TERA, "float16": 1307.4 * TERA,
      "float8": 2614.9 * TERA}, 5.3e12),
)  # fmt: skip


def datasheet_ceilings(device_name: str | None) -> DatasheetCeilings | None:
    """Datasheet ceilings of the named device, or None when it is not in the table."""
    if not device_name:
        return None
    upper = device_name.upper()
    for needles, label, flops, bandwidth in _TABLE:
        if all(n in upper for n in needles):
            return DatasheetCeilings(
                device=label,
                device_name=device_name,
                peak_flops=dict(flops),
                mem_bandwidth_bytes_per_s=bandwidth,
            )
    return None
