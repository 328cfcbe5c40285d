"""`Ceilings` from a datasheet: no machine fingerprint, no measurement time."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from torchdoctor.core.env import Ceilings
from torchdoctor.core.errors import RecordError


def _datasheet(**extra: object) -> Ceilings:
    return Ceilings(
        device="cuda",
        device_name="NVIDIA A100-SXM4-80GB",
        peak_flops={"float16": 312e12, "float32": 19.5e12},
        mem_bandwidth_bytes_per_s=2.039e12,
        source="datasheet",
        method={"reference": "NVIDIA A100 Tensor Core GPU datasheet"},
        **extra,  # type: ignore[arg-type]
    )


def test_datasheet_ceilings_need_no_fingerprint_or_time(tmp_path: Path) -> None:
    c = _datasheet()
    assert c.fingerprint_key is None and c.measured_at is None
    assert Ceilings.read(c.write(tmp_path / "a100.json")) == c


def test_measured_ceilings_must_name_their_machine(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="fingerprint_key"):
        Ceilings(
            device="cpu",
            device_name="x",
            peak_flops={"float32": 1e11},
            mem_bandwidth_bytes_per_s=1e10,
            source="measured",
        )
    data = _datasheet().to_json_dict() | {"source": "measured"}
    with pytest.raises(RecordError, match="fingerprint_key"):
        Ceilings.from_json_dict(data)
