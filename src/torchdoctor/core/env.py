"""The machine's fingerprint and the record of its measured ceilings.

`fingerprint()` describes what performance depends on: CPU model and features, cores, the
torch build and its threads, GPUs. `fingerprint_key()` hashes the parts that change the
ceilings, so measured ceilings are cached per machine and re-measured when any of them
changes. The measuring itself lives in `torchdoctor.measure.ceilings` (core does not import
measure); torch is imported inside the functions, never at module import.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from pathlib import Path
from typing import Any, ClassVar, Final, Literal, Self

from pydantic import Field, model_validator

from torchdoctor.core.load import MachineLoad
from torchdoctor.core.records import Record

#: CPU flags that decide matmul speed, as /proc/cpuinfo names them (Linux kernel spelling).
SIMD_FLAGS: tuple[str, ...] = (
    "fma",
    "f16c",
    "avx2",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_fp16",
    "amx_int8",
    "asimd",  # Arm NEON
    "sve",
    "bf16",  # Arm bf16 extension
)

CACHE_DIR_ENV = "TORCHDOCTOR_CACHE_DIR"


class CudaDevice(Record):
    schema_name: ClassVar[str] = "cuda_device"

    index: int
    name: str
    compute_capability: str
    total_memory_bytes: int
    multiprocessors: int
    driver: str | None = None


class EnvFingerprint(Record):
    """What this machine and this torch build are."""

    schema_name: ClassVar[str] = "env_fingerprint"

    cpu_model: str
    cpu_arch: str
    cores_physical: int | None
    cores_logical: int
    cpu_flags: list[str] = Field(description="the SIMD/matrix flags of SIMD_FLAGS present")
    os: str
    python: str
    torch_version: str
    torch_cuda: str | None
    torch_hip: str | None
    torch_mkl: bool
    torch_mkldnn: bool
    torch_openmp: bool
    torch_blas: str | None
    intra_op_threads: int
    cuda_devices: list[CudaDevice] = Field(default_factory=list)

    def key(self) -> str:
        return fingerprint_key(self)


class Ceilings(Record):
    """Peak matmul FLOP/s per dtype and memory bandwidth of one device: the roofline's roof.

    `source="measured"`: timed on this machine; `fingerprint_key` (required then) says which
    machine, `measured_at` when. `source="datasheet"`: a vendor's published figures for a
    device model, true of no machine in particular, so both may be None; `method` can say
    where the figures come from (e.g. {"reference": "<datasheet title or URL>"}).

    `peak_flops` keys are torch dtype names, plus "tf32" (float32 matmuls on tensor cores,
    CUDA compute capability 8.0 and later). `machine_load` is the other work on the machine
    while they were measured; measured ceilings whose `machine_load.disturbed` is true are
    not this machine's peaks and are never cached.

    Version 2 added "tf32" and `machine_load`; version 1 files still read.
    """

    schema_name: ClassVar[str] = "ceilings"
    schema_version: ClassVar[int] = 2

    device: str
    device_name: str
    peak_flops: dict[str, float] = Field(description="dtype name -> FLOP/s")
    mem_bandwidth_bytes_per_s: float
    source: Literal["measured", "datasheet"]
    fingerprint_key: str | None = None
    measured_at: str | None = Field(default=None, description="ISO 8601 UTC time")
    method: dict[str, Any] = Field(
        default_factory=dict, description="how: matmul sizes, copy bytes, timing budget"
    )
    machine_load: MachineLoad | None = None

    @property
    def disturbed(self) -> bool:
        return self.machine_load is not None and self.machine_load.disturbed

    @model_validator(mode="after")
    def _measured_names_its_machine(self) -> Self:
        if self.source == "measured" and not self.fingerprint_key:
            raise ValueError("measured ceilings need the fingerprint_key of the machine measured")
        return self


def _cpu_model_and_flags() -> tuple[str, set[str]]:
    """From /proc/cpuinfo (fast, Linux); else py-cpuinfo (slower: it may spawn a process)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    model = re.search(r"^(?:model name|Model|Hardware)\s*:\s*(.+)$", text, re.MULTILINE)
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.+)$", text, re.MULTILINE)
    if model and flags:
        return model.group(1).strip(), set(flags.group(1).split())
    import cpuinfo

    info = cpuinfo.get_cpu_info()
    return str(info.get("brand_raw") or platform.processor() or "unknown"), set(
        info.get("flags", [])
    )


#: CPU flags of bf16 matrix units: AMX (Intel Sapphire Rapids on), AVX512-BF16 (Intel Cooper
#: Lake, AMD Zen 4 on), and Arm's bf16 extension.
BF16_FLAGS: Final = frozenset({"amx_bf16", "avx512_bf16", "bf16"})


def cpu_computes_bf16() -> bool:
    """Whether this CPU has bf16 matrix units (else bf16 is emulated, slower than fp32)."""
    return bool(BF16_FLAGS & _cpu_model_and_flags()[1])


def _torch_blas(config: str) -> str | None:
    match = re.search(r"BLAS_INFO=(\w+)", config)
    return match.group(1) if match else None


def _cuda_devices() -> list[CudaDevice]:
    import torch

    if not torch.cuda.is_available():
        return []
    driver = _nvidia_driver()
    devices = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        devices.append(
            CudaDevice(
                index=i,
                name=props.name,
                compute_capability=f"{props.major}.{props.minor}",
                total_memory_bytes=int(props.total_memory),
                multiprocessors=int(props.multi_processor_count),
                driver=driver,
            )
        )
    return devices


def _nvidia_driver() -> str | None:
    """The NVIDIA driver version via NVML when pynvml is installed (optional dependency)."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        return None


def fingerprint() -> EnvFingerprint:
    """Describe this machine and torch build (takes well under a second without a GPU)."""
    import psutil
    import torch

    model, flags = _cpu_model_and_flags()
    config = torch.__config__.show()
    return EnvFingerprint(
        cpu_model=model,
        cpu_arch=platform.machine(),
        cores_physical=psutil.cpu_count(logical=False),
        cores_logical=os.cpu_count() or 1,
        cpu_flags=[f for f in SIMD_FLAGS if f in flags],
        os=f"{platform.system()} {platform.release()}",
        python=platform.python_version(),
        torch_version=str(torch.__version__),
        torch_cuda=torch.version.cuda,
        torch_hip=getattr(torch.version, "hip", None),
        torch_mkl=bool(torch.backends.mkl.is_available()),
        torch_mkldnn=bool(torch.backends.mkldnn.is_available()),
        torch_openmp=bool(torch.backends.openmp.is_available()),
        torch_blas=_torch_blas(config),
        intra_op_threads=torch.get_num_threads(),
        cuda_devices=_cuda_devices(),
    )


def fingerprint_key(fp: EnvFingerprint | None = None) -> str:
    """Stable 16-hex-digit hash of what the ceilings depend on (not the Python version)."""
    fp = fp or fingerprint()
    relevant = fp.model_dump(mode="json", exclude={"python", "os"})
    for device in relevant.get("cuda_devices", []):
        device.pop("driver", None)  # a driver update does not move the roofline much
    blob = json.dumps(relevant, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def cache_dir() -> Path:
    """Where measured ceilings are cached: $TORCHDOCTOR_CACHE_DIR or the user cache dir."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("torchdoctor"))
