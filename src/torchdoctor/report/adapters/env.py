"""env.json (EnvFingerprint + Ceilings), or the diagnosis's own ceilings -> EnvSection."""

from __future__ import annotations

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import (
    JsonDict,
    floats,
    items,
    mapping,
    num,
    scalars,
    text,
)
from torchdoctor.report.load import RunRecords
from torchdoctor.report.views import EnvSection, KeyValue

#: Fingerprint fields not worth a row (long lists or internal keys).
_SKIP_FACTS = ("fingerprint_key",)


def _gpu(gpu: JsonDict) -> str:
    parts = [
        text(gpu, "name") or "?",
        f"compute capability {text(gpu, 'compute_capability') or fmt.NA}",
        fmt.nbytes(num(gpu, "total_memory_bytes")),
    ]
    if driver := text(gpu, "driver"):
        parts.append(f"driver {driver}")
    return ", ".join(parts)


def env_parts(found: RunRecords) -> dict[str, JsonDict]:
    """env.json's fingerprint and ceilings; without it, those the diagnosis was judged by."""
    diagnosis = found.records.get("diagnosis", {})
    if not found.env and diagnosis.get("ceilings"):
        fingerprint = diagnosis.get("environment") or {}
        return {"fingerprint": fingerprint, "ceilings": diagnosis["ceilings"]}
    return found.env


def environment(found: RunRecords) -> EnvSection | None:
    """The environment section of a run folder (None: no environment recorded)."""
    parts = env_parts(found)
    return env_section(parts) if parts else None


def env_section(env: dict[str, JsonDict]) -> EnvSection:
    fingerprint = env.get("fingerprint", {})
    ceilings = env.get("ceilings", {})
    facts = [KeyValue(fmt.label(k), fmt.number(v)) for k, v in scalars(fingerprint, _SKIP_FACTS)]
    flags = [str(f) for f in items(fingerprint, "cpu_flags")]
    if flags:
        facts.append(KeyValue("SIMD / matrix features", ", ".join(flags)))
    for gpu in items(fingerprint, "cuda_devices"):
        if isinstance(gpu, dict):
            facts.append(KeyValue(f"cuda:{fmt.number(gpu.get('index'))}", _gpu(gpu)))
    peak = floats(mapping(ceilings, "peak_flops"))
    bandwidth = num(ceilings, "mem_bandwidth_bytes_per_s")
    source = text(ceilings, "source")
    # Say where each ceiling came from: measured here, cached, or a datasheet for a trace
    # recorded on another machine.
    measured_at = text(ceilings, "measured_at")
    # Said once, above the ceilings it is true of.
    if source:
        facts.append(KeyValue("ceilings", source))
    if measured_at:
        facts.append(KeyValue("ceilings measured at", measured_at))
    facts += [KeyValue(f"peak {dtype}", fmt.flops(v)) for dtype, v in peak.items()]
    if bandwidth is not None:
        facts.append(KeyValue("memory bandwidth", fmt.bandwidth(bandwidth)))
    return EnvSection(
        facts=facts,
        peak_flops=peak,
        mem_bandwidth_bytes_per_s=bandwidth,
        ceilings_source=source,
        device_name=text(ceilings, "device_name", "device"),
    )
