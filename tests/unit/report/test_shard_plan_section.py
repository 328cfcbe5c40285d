"""The "Memory per rank (FSDP2)" section: `memory WORKLOAD --nproc N`'s estimate in every form,
from a stored real estimate of a tiny gpt (tests/data/report_golden/inputs/shard_plan.json);
a `memory` run folder holds memory.json or shard_plan.json, and neither is missing beside the
other."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

from golden_cases import INPUTS
from report_samples import make_plain_run
from rich.console import Console

from torchdoctor.core import rundir
from torchdoctor.core.memory_owners import MemoryPlan
from torchdoctor.core.shard_memory import ShardPlan
from torchdoctor.report.adapters import build_view
from torchdoctor.report.api import render_text
from torchdoctor.report.load import read_input
from torchdoctor.report.terminal.sections import render_records

PLAN = ShardPlan.read(INPUTS / "shard_plan.json")


def _memory_run(tmp_path: Path, *, shards: bool, complete: bool = True) -> Path:
    run_dir = rundir.new_run_dir("memory", "gpt", out=tmp_path / "run")
    if shards:
        PLAN.write(run_dir / rundir.SHARD_PLAN)
    if complete:
        rundir.finish_run_dir(run_dir)
    return run_dir


def test_each_n_is_a_column_with_its_batch_and_verdict_in_every_form(tmp_path: Path) -> None:
    found = read_input(_memory_run(tmp_path, shards=True))
    md = render_text(found, "md")
    html = render_text(found, "html")
    out = StringIO()
    render_records(Console(file=out, width=100, color_system=None), {"shard_plan": PLAN})
    # the record's own numbers: N=1 and N=4 with the largest batch each fits in 4 MiB
    assert sorted(PLAN.max_batch) == [1, 4]
    batches = [str(PLAN.max_batch[n]) for n in (1, 4)]
    assert f"| batch | {batches[0]} | {batches[1]} |" in md
    assert "<th>N=1</th><th>N=4</th>" in html and 'id="shard_plan"' in html
    for form in (md, html, out.getvalue()):
        assert "Memory per rank (FSDP2)" in form
        assert f"N=4: fits, batch {batches[1]} per rank under 4.0 MiB." in form
        assert "DDP, FSDP and FSDP with CPU offload, per rank" in form


def test_a_shard_plan_stands_for_the_memory_plan_of_its_run(tmp_path: Path) -> None:
    assert build_view(read_input(_memory_run(tmp_path, shards=True))).missing == []


def test_a_memory_plan_stands_for_the_shard_plan_of_its_run(tmp_path: Path) -> None:
    run_dir = _memory_run(tmp_path, shards=False)
    MemoryPlan(workload="gpt", device="cpu", steps=[]).write(run_dir / rundir.MEMORY)
    assert build_view(read_input(run_dir)).missing == []


def test_a_memory_run_that_wrote_neither_lacks_both(tmp_path: Path) -> None:
    run_dir = _memory_run(tmp_path, shards=False, complete=False)
    missing = build_view(read_input(run_dir)).missing
    assert {m.file for m in missing} == {rundir.MEMORY, rundir.SHARD_PLAN}
    assert all("never finished" in m.why for m in missing)


def test_another_kind_of_run_has_no_section(tmp_path: Path) -> None:
    assert "Memory per rank" not in render_text(read_input(make_plain_run(tmp_path)), "md")
