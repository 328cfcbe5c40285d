"""What the first run on a real H200 recorded, read by today's code on a CPU machine.

The records (tests/data/h200/, README there) stand in for the GPU tier where reading them is
the check: the measured ceilings parse as `Ceilings` and land where an H200's datasheet says
sustained figures land (60-90% of the dense peaks; copy 75-95% of the HBM bandwidth).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchdoctor.analyze.devices import datasheet_ceilings
from torchdoctor.core.env import Ceilings

H200 = Path(__file__).parents[2] / "data" / "h200"


@pytest.fixture(scope="module")
def ceilings() -> Ceilings:
    return Ceilings.from_json_dict(json.loads((H200 / "env.json").read_text())["ceilings"])


def test_the_h200_is_in_the_datasheet_table(ceilings: Ceilings) -> None:
    sheet = datasheet_ceilings(ceilings.device_name)
    assert sheet is not None
    assert "H200" in sheet.method["model"]


def test_measured_matmul_ceilings_are_sustained_fractions_of_the_datasheet(
    ceilings: Ceilings,
) -> None:
    sheet = datasheet_ceilings(ceilings.device_name)
    assert sheet is not None
    for dtype in ("float32", "tf32", "float16", "bfloat16"):
        share = ceilings.peak_flops[dtype] / sheet.peak_flops[dtype]
        assert 0.6 <= share <= 0.9, (dtype, share)
    copy = ceilings.mem_bandwidth_bytes_per_s / sheet.mem_bandwidth_bytes_per_s
    assert 0.75 <= copy <= 0.95
