"""This machine's environment and ceilings for a diagnosis (core.env, measure.ceilings).

Ceilings come from the cache, or are measured once per machine (~10-20 s on CPU). A
diagnosis without them still runs every rule that does not need them (the roofline classes
and `lower_precision_available` do), and says why in its notes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

from torchdoctor.core.env import Ceilings
from torchdoctor.core.errors import TorchDoctorError
from torchdoctor.diagnose.evidence import CeilingEvidence

_T = TypeVar("_T", bound=Hashable)

log = logging.getLogger(__name__)


def local_ceilings(device: str = "cpu") -> tuple[Ceilings | None, str | None]:
    """(Ceilings, None) for this machine's `device`, or (None, why not)."""
    from torchdoctor.measure import get_ceilings

    try:
        return get_ceilings(device=device), None
    except TorchDoctorError as exc:
        return None, f"ceilings unavailable: {exc}"


def ceilings_for_device(device: str) -> tuple[Ceilings | None, str | None]:
    """This machine's measured ceilings for the device a job ran on ("cuda:0" -> the GPU's,
    "cpu" -> the CPU's), or (None, why not). A job's trace is placed against the ceilings of
    the device its kernels ran on: a GPU job's against this machine's GPU, never its CPU.
    When they cannot be had, the analyzer falls back to the datasheet of the GPU the trace
    names (or its kernel names show) and labels the ceilings so."""
    kind = device.split(":", 1)[0].lower()
    return local_ceilings(device=kind if kind in ("cpu", "cuda") else "cpu")


def local_environment() -> dict[str, Any] | None:
    """The environment fingerprint as a JSON dict, or None when it cannot be taken."""
    from torchdoctor.core.env import fingerprint

    try:
        return dict(fingerprint().to_json_dict())
    except (TorchDoctorError, OSError) as exc:
        log.debug("environment fingerprint failed: %s", exc)
        return None


def cuda_capability_in(
    environment: Mapping[str, Any] | None, device: str
) -> tuple[int, int] | None:
    """The compute capability of `device` ("cuda", "cuda:1") by the environment fingerprint.

    None when the fingerprint is missing, the device is not CUDA, torch is a ROCm build (its
    "capability" is the gfx architecture, not NVIDIA's numbering), or the device is "cuda"
    without an index on a machine whose visible GPUs differ (the job may use any of them).
    """
    if environment is not None and environment.get("torch_hip"):
        return None

    def capability(dev: Mapping[str, Any]) -> tuple[int, int]:
        major, minor = str(dev["compute_capability"]).split(".", 1)
        return int(major), int(minor)

    return _of_cuda_device(environment, device, capability)


def cuda_memory_in(environment: Mapping[str, Any] | None, device: str) -> int | None:
    """Total memory (bytes) of `device` ("cuda", "cuda:1") by the environment fingerprint.

    The limit the memory-headroom rule compares a run's device peak with. None off CUDA,
    without a fingerprint, or for "cuda" without an index when the visible GPUs differ.
    """
    return _of_cuda_device(environment, device, lambda dev: int(dev["total_memory_bytes"]))


def memory_per_rank(
    environment: Mapping[str, Any] | None, device: str, local_ranks: int | None
) -> int | None:
    """The memory one rank of a job may use: its CUDA device's (`cuda_memory_in`), or on the
    CPU this host's RAM shared by the job's ranks on it (None where unread)."""
    if device.split(":", 1)[0] == "cuda":
        return cuda_memory_in(environment, device)
    if device != "cpu":
        return None
    import psutil

    return int(psutil.virtual_memory().total) // max(1, local_ranks or 1)


def _of_cuda_device(
    environment: Mapping[str, Any] | None,
    device: str,
    read: Callable[[Mapping[str, Any]], _T],
) -> _T | None:
    """`read` of `device`'s entry in the fingerprint's CUDA devices: the entry of its index, or
    for "cuda" without one the value all visible GPUs share (None when they differ)."""
    kind, _, index = device.partition(":")
    if environment is None or kind != "cuda":
        return None
    found: dict[int, _T] = {}
    for dev in environment.get("cuda_devices") or []:
        try:
            found[int(dev["index"])] = read(dev)
        except (KeyError, TypeError, ValueError):
            continue
    if index:
        return found.get(int(index)) if index.isdigit() else None
    distinct = set(found.values())
    return distinct.pop() if len(distinct) == 1 else None


def ceilings_as_evidence(ceilings: Ceilings | None) -> CeilingEvidence | None:
    """Ceilings (core.env) -> CeilingEvidence, labelled by how they were obtained."""
    if ceilings is None:
        return None
    when = f", {ceilings.measured_at}" if ceilings.measured_at else ""
    if ceilings.disturbed:
        when += ", on a disturbed machine (not cached)"
    return CeilingEvidence(
        device=ceilings.device,
        device_name=ceilings.device_name,
        peak_flops={k: float(v) for k, v in ceilings.peak_flops.items()},
        mem_bandwidth_bytes_per_s=ceilings.mem_bandwidth_bytes_per_s,
        source=f"{ceilings.source} on this machine{when}",
    )
