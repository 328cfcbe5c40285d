"""The line sampler names the planted line of tests/zoo/host_work_planted_line.py as the top
line, in a single process and on rank 1 of a 2-rank torchrun job (real processes: studies)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.collect import read_profiles
from torchdoctor.collect.script_profile import ScriptProfile
from torchdoctor.diagnose import diagnose_evidence
from torchdoctor.diagnose.from_profile import evidence_from_profile
from torchdoctor.procs import run_script

pytestmark = pytest.mark.study

SCRIPT = Path(__file__).resolve().parents[1] / "zoo" / "host_work_planted_line.py"
#: Steps per run: after the warm-up, ~50 steady steps of ~10-20 ms hold ~80 samples, well
#: above what the rule asks for (`core.hostlines.MIN_SAMPLES`).
STEPS = "60"


def planted_site() -> str:
    lines = SCRIPT.read_text().splitlines()
    number = next(i for i, text in enumerate(lines, start=1) if "# PLANTED_LINE" in text)
    return f"{SCRIPT}:{number}"


def assert_names_the_planted_line(profile: ScriptProfile) -> None:
    assert profile.host_lines is not None, profile.errors
    assert profile.host_lines.enough, profile.host_lines.samples
    top = profile.host_lines.top()
    assert top is not None and top.site == planted_site(), profile.host_lines.lines[:3]
    assert top.function == "tokenize" and top.main_phase == "other"
    diagnosis = diagnose_evidence(evidence_from_profile(profile))
    finding = diagnosis.finding("host_python_lines")
    assert finding is not None and finding.evidence["top_line"] == planted_site()
    assert finding.prescription.site == planted_site()


def test_single_process_names_the_planted_line(tmp_path: Path) -> None:
    profile = run_script([str(SCRIPT), STEPS], out_dir=tmp_path, profile_steps=0)
    assert profile.exit_code == 0 and profile.step_count == int(STEPS)
    assert_names_the_planted_line(profile)


def test_rank_1_of_a_torchrun_job_names_the_planted_line(tmp_path: Path) -> None:
    argv = ["torch.distributed.run", "--standalone", "--nproc_per_node=2", str(SCRIPT), STEPS]
    main = run_script(argv, module=True, out_dir=tmp_path, profile_steps=0, memory_owners=True)
    assert main.exit_code == 0
    rank1 = next(p for p in read_profiles(tmp_path) if p.rank == 1)
    assert rank1.world_size == 2 and rank1.step_count == int(STEPS)
    assert_names_the_planted_line(rank1)
    # Every rank splits one warm-up step's memory into its owners too (probes/step_memory.py),
    # and that slowed step is none of the lines' steady steps.
    assert rank1.memory is not None, rank1.memory_skipped
    assert rank1.memory.parameters_bytes > 0 and rank1.memory.gradients_bytes > 0
