"""The "FSDP units" section: a sharded job's units with their all-gathers and reduce-scatters,
from the analysis of a recorded 2-rank gloo FSDP2 job (tests/data/traces/fsdp2_gloo_*); absent
for a job that does not shard."""

from __future__ import annotations

from pathlib import Path

from torchdoctor.analyze import analyze_trace
from torchdoctor.report.api import render_text
from torchdoctor.report.load import read_input

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"


def _markdown(folder: str, tmp_path: Path) -> str:
    analyze_trace(TRACES / folder).write(tmp_path / "analysis.json")
    return render_text(read_input(tmp_path / "analysis.json"), "md")


def test_each_unit_is_a_row_with_its_dtypes_and_the_re_gathers(tmp_path: Path) -> None:
    md = _markdown("fsdp2_gloo_reshard", tmp_path)
    assert "## FSDP units (rank 0)" in md
    rows = [line for line in md.splitlines() if line.startswith(("| root ", "| blocks."))]
    assert [r.split("|")[1].strip() for r in rows] == ["root", "blocks.0", "blocks.1", "blocks.2"]
    assert all("| bf16 / bf16 |" in r for r in rows)
    assert "| re-gathered in backward | 4 |" in md
    assert "| unsharded peak | 2.1 MiB |" in md  # the root and two 1 MiB blocks at once


def test_an_fp32_reduce_shows_in_the_dtype_column(tmp_path: Path) -> None:
    md = _markdown("fsdp2_gloo_fp32_reduce", tmp_path)
    assert md.count("| bf16 / fp32 |") == 4 and "| re-gathered in backward | 0 |" in md


def test_a_job_without_fsdp_has_no_section(tmp_path: Path) -> None:
    assert "FSDP units" not in _markdown("ddp_gloo_straggler_compute", tmp_path)
