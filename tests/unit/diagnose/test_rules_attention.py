"""handwritten_attention: the pattern in a recorded trace of `gpt` written by hand, and not in
the field's traces whose models use SDPA; the rule on constructed evidence."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from diagnose_builders import evidence

from torchdoctor.analyze import analyze_trace
from torchdoctor.diagnose.api import diagnose_trace_analysis
from torchdoctor.diagnose.evidence import TraceEvidence
from torchdoctor.diagnose.rules import handwritten_attention
from torchdoctor.tune.prescriptions import prescribed_knobs

DATA = Path(__file__).resolve().parents[2] / "data"
MANUAL = DATA / "recorded" / "gpt_manual_attention_cpu.json.gz"


def test_gpt_written_by_hand_is_found_in_its_recorded_trace() -> None:
    analysis = analyze_trace(MANUAL)
    assert analysis.attention is not None
    assert analysis.attention.blocks == 2 and analysis.attention.per_step == 2.0  # 2 layers
    d = diagnose_trace_analysis(analysis)
    f = d.finding("handwritten_attention")
    assert f is not None and f.evidence["attention_blocks_per_step"] == 2.0
    assert 0 < f.share < 1 and f.local_speedup == handwritten_attention.SDPA_LOCAL_SPEEDUP
    assert f.prescription.snippet is not None
    assert "scaled_dot_product_attention(q, k, v" in f.prescription.snippet


@pytest.mark.parametrize(
    "name", ["tracelens_h100_bert_small.json.gz", "tracelens_h100_qwen15_05b.json.gz"]
)
def test_models_that_use_sdpa_are_not_flagged(name: str) -> None:
    assert analyze_trace(DATA / "traces" / name).attention is None


def trace(per_step: float | None, share: float | None = None, **kw: object) -> TraceEvidence:
    return TraceEvidence(
        has_device=False,
        handwritten_attention_per_step=per_step,
        handwritten_attention_share=share,
        **kw,  # type: ignore[arg-type]
    )


def test_rule_bound_uses_the_assumed_local_speedup() -> None:
    f = handwritten_attention.check(evidence(trace=trace(4.0, 0.5)))
    assert f is not None and f.amdahl_bound == pytest.approx(1 / (1 - 0.5 * 0.5))
    assert "fused CPU kernel" in f.prescription.code_change
    assert handwritten_attention.check(evidence(trace=trace(None))) is None
    assert handwritten_attention.check(evidence()) is None


def test_on_an_older_gpu_the_memory_efficient_kernel_is_named() -> None:
    ev = evidence(
        device="cuda",
        cuda_capability=(7, 5),
        trace=trace(2.0).model_copy(update={"has_device": True}),
    )
    f = handwritten_attention.check(ev)
    assert f is not None and "memory-efficient" in f.prescription.code_change
    assert f.severity == "info"  # no host-time share on a device


def test_a_workload_is_prescribed_the_attention_knob_a_script_the_snippet() -> None:
    # A workload may expose its attention as a parameter (gpt's `attention`), which the tuner
    # switches and measures; a script's attention is its code, handed back as the snippet.
    on_workload = handwritten_attention.check(evidence(source="workload", trace=trace(2.0, 0.3)))
    on_script = handwritten_attention.check(evidence(source="script", trace=trace(2.0, 0.3)))
    assert on_workload is not None and on_script is not None
    assert on_workload.prescription.knobs == {"attention": "sdpa"}
    assert on_script.prescription.knobs == {}
    assert on_script.prescription.snippet == on_workload.prescription.snippet
    # So the speed ladder tries it first where the diagnosis found it (`tune --diagnose`).
    diagnosis = SimpleNamespace(findings=[on_workload])
    assert prescribed_knobs(diagnosis) == ["attention"]
