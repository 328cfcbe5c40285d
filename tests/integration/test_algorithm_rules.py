"""Algorithm rules on a real script: hand-written attention found in the profiled window of
tests/zoo/attention_by_hand.py, and SDPA handed back (a real process: studies)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.analyze import analyze_trace
from torchdoctor.diagnose import diagnose_evidence
from torchdoctor.diagnose.from_profile import evidence_from_profile
from torchdoctor.procs import run_script

#: A real profiled process; the finding rests on the trace's ops, not on their times.
pytestmark = [pytest.mark.study, pytest.mark.untimed]

SCRIPT = Path(__file__).resolve().parents[1] / "zoo" / "attention_by_hand.py"


def test_handwritten_attention_is_found_in_a_script(tmp_path: Path) -> None:
    profile = run_script([str(SCRIPT), "8"], out_dir=tmp_path, warmup=3, profile_steps=2)
    assert profile.exit_code == 0 and profile.trace_path is not None
    analysis = analyze_trace(profile.trace_path)
    assert analysis.attention is not None and analysis.attention.per_step == 1.0
    diagnosis = diagnose_evidence(evidence_from_profile(profile, analysis))
    finding = diagnosis.finding("handwritten_attention")
    assert finding is not None and finding.evidence["attention_blocks_per_step"] == 1.0
    assert finding.prescription.snippet is not None
    assert "scaled_dot_product_attention" in finding.prescription.snippet
