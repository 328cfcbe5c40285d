"""env.json (EnvFingerprint + Ceilings) -> EnvSection."""

from __future__ import annotations

from torchdoctor.report import format as fmt
from torchdoctor.report.adapters._access import JsonDict, floats, mapping, num, scalars, text
from torchdoctor.report.model import EnvSection, KeyValue

#: Fingerprint fields not worth a row (long lists or internal keys).
_SKIP_FACTS = ("cache_key", "fingerprint_id")


def env_section(env: dict[str, JsonDict]) -> EnvSection:
    fingerprint = env.get("fingerprint", {})
    ceilings = env.get("ceilings", {})
    facts = [KeyValue(fmt.label(k), fmt.number(v)) for k, v in scalars(fingerprint, _SKIP_FACTS)]
    peak = floats(mapping(ceilings, "peak_flops"))
    bandwidth = num(ceilings, "mem_bandwidth_bytes_per_s")
    source = text(ceilings, "source")
    # Say where each ceiling came from: measured here, cached, or a datasheet for a trace
    # recorded on another machine.
    how = f" ({source})" if source else ""
    facts += [KeyValue(f"peak {dtype}{how}", fmt.flops(v)) for dtype, v in peak.items()]
    if bandwidth is not None:
        facts.append(KeyValue(f"memory bandwidth{how}", fmt.bandwidth(bandwidth)))
    return EnvSection(
        facts=facts,
        peak_flops=peak,
        mem_bandwidth_bytes_per_s=bandwidth,
        ceilings_source=source,
        device_name=text(ceilings, "device_name", "device"),
    )
