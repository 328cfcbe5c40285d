"""This machine's environment and ceilings for a diagnosis (core.env, measure.ceilings).

Ceilings come from the cache, or are measured once per machine (~10-20 s on CPU). A
diagnosis without them still runs every rule that does not need them (the roofline classes
and `lower_precision_available` do), and says why in its notes.
"""

from __future__ import annotations

import logging
from typing import Any

from torchdoctor.core.env import Ceilings
from torchdoctor.core.errors import TorchDoctorError
from torchdoctor.diagnose.evidence import CeilingEvidence

log = logging.getLogger(__name__)


def local_ceilings(device: str = "cpu") -> tuple[Ceilings | None, str | None]:
    """(Ceilings, None) for this machine's `device`, or (None, why not)."""
    from torchdoctor.measure.ceilings import get_ceilings

    try:
        return get_ceilings(device=device), None
    except TorchDoctorError as exc:
        return None, f"ceilings unavailable: {exc}"


def local_environment() -> dict[str, Any] | None:
    """The environment fingerprint as a JSON dict, or None when it cannot be taken."""
    from torchdoctor.core.env import fingerprint

    try:
        return dict(fingerprint().to_json_dict())
    except (TorchDoctorError, OSError) as exc:
        log.debug("environment fingerprint failed: %s", exc)
        return None


def ceilings_as_evidence(ceilings: Ceilings | None) -> CeilingEvidence | None:
    """Ceilings (core.env) -> CeilingEvidence, labelled by how they were obtained."""
    if ceilings is None:
        return None
    when = f", {ceilings.measured_at}" if ceilings.measured_at else ""
    return CeilingEvidence(
        device=ceilings.device,
        device_name=ceilings.device_name,
        peak_flops={k: float(v) for k, v in ceilings.peak_flops.items()},
        mem_bandwidth_bytes_per_s=ceilings.mem_bandwidth_bytes_per_s,
        source=f"{ceilings.source} on this machine{when}",
    )
