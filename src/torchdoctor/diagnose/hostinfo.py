"""This machine's environment and ceilings for a diagnosis, when the env stage provides them.

`torchdoctor.core.env` and `torchdoctor.measure.ceilings` are optional here: a diagnosis
without ceilings still runs every rule that does not need them (the roofline classes and
`lower_precision_available` do), and says so in its notes.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from torchdoctor.core.errors import TorchDoctorError

log = logging.getLogger(__name__)


def local_ceilings() -> tuple[Any | None, str | None]:
    """(Ceilings, None) for this machine, or (None, why not)."""
    try:
        module = importlib.import_module("torchdoctor.measure.ceilings")
    except ImportError:
        return None, "ceilings unavailable (torchdoctor.measure.ceilings not installed)"
    try:
        return module.get_ceilings(), None
    except TorchDoctorError as exc:
        return None, f"ceilings unavailable: {exc}"


def local_environment() -> dict[str, Any] | None:
    """The environment fingerprint as a JSON dict, or None when it cannot be taken."""
    try:
        module = importlib.import_module("torchdoctor.core.env")
    except ImportError:
        return None
    for name in ("fingerprint", "get_fingerprint", "collect_fingerprint"):
        fn = getattr(module, name, None)
        if callable(fn):
            try:
                record = fn()
            except TorchDoctorError as exc:
                log.debug("environment fingerprint failed: %s", exc)
                return None
            return dict(record.to_json_dict()) if hasattr(record, "to_json_dict") else None
    return None


def ceilings_as_evidence(ceilings: Any | None) -> Any | None:
    """Ceilings (core.env) -> CeilingEvidence."""
    if ceilings is None:
        return None
    from torchdoctor.diagnose.evidence import CeilingEvidence

    return CeilingEvidence(
        device=str(ceilings.device),
        device_name=getattr(ceilings, "device_name", None),
        peak_flops={str(k): float(v) for k, v in dict(ceilings.peak_flops).items()},
        mem_bandwidth_bytes_per_s=getattr(ceilings, "mem_bandwidth_bytes_per_s", None),
        source=f"measured ({getattr(ceilings, 'source', 'unknown')})",
    )
