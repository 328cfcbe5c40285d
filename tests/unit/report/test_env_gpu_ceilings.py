"""`torchdoctor env` on a GPU shows each sustained ceiling with its burst and the clocks it ran
at, where the measurement recorded them (the H200 record, with the figures a GPU now adds)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from torchdoctor.core.env import Ceilings
from torchdoctor.report.terminal.env import ceilings_table

H200_ENV = Path(__file__).parents[2] / "data" / "h200" / "env.json"


def _text(method_extra: dict[str, object]) -> str:
    data = json.loads(H200_ENV.read_text())["ceilings"]
    data["method"].update(method_extra)
    console = Console(width=160, record=True)
    console.print(ceilings_table(Ceilings.from_json_dict(data)))
    return console.export_text()


def test_burst_and_clocks_beside_the_sustained_ceiling() -> None:
    text = _text(
        {
            "burst_flops": {"bfloat16": 6.7e14},
            "clocks": {"bfloat16": {"sm_clock_mhz_min": 1755.0, "sm_clock_mhz_max": 1980.0}},
            "burst_bandwidth_bytes_per_s": 3.9e12,
        }
    )
    assert "649696.4 GFLOP/s (burst 670000.0, SM 1755-1980 MHz)" in text
    assert "3884.57 GB/s (burst 3900.00)" in text


def test_a_record_without_them_reads_as_before() -> None:
    text = _text({})
    assert "burst" not in text and "649696.4 GFLOP/s" in text
