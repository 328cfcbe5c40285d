"""No diagnosis rule prescribes bf16 or TF32 on a CUDA GPU known to be older than Ampere."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from diagnose_builders import evidence, phases

from torchdoctor.collect.script_profile import ScriptProfile
from torchdoctor.diagnose import api
from torchdoctor.diagnose.evidence import (
    CeilingEvidence,
    ConfigEvidence,
    Evidence,
    MemoryEvidence,
    TraceEvidence,
)
from torchdoctor.diagnose.from_trace import evidence_from_trace
from torchdoctor.diagnose.hostinfo import cuda_capability_in
from torchdoctor.diagnose.rules import RULES, lower_precision_available, memory_headroom

NEAR = MemoryEvidence(peak_bytes=95, limit_bytes=100)
V100, T4, A100 = (7, 0), (7, 5), (8, 0)
TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"


def _headroom(**fields: Any) -> Any:
    f = memory_headroom.check(evidence(memory=NEAR, **fields))
    assert f is not None and f.title == "Memory near the limit"
    return f


@pytest.mark.parametrize(("cap", "sm"), [(V100, "sm_70"), (T4, "sm_75")])
def test_memory_headroom_prescribes_fp16_with_a_reason_before_ampere(
    cap: tuple[int, int], sm: str
) -> None:
    f = _headroom(device="cuda", cuda_capability=cap)
    assert f.prescription.knobs == {"checkpointing": True, "precision": "fp16"}
    assert sm in f.summary and "bf16" in f.summary
    assert "GradScaler" in f.prescription.code_change and sm in f.prescription.code_change
    assert f.evidence["cuda_capability"] == sm


@pytest.mark.parametrize(
    "fields",
    [
        {"device": "cuda", "cuda_capability": A100},
        {"device": "cuda:1", "cuda_capability": (9, 0)},
        {"device": "cpu"},
        {"device": "cuda"},  # capability unknown: today's behaviour
    ],
)
def test_memory_headroom_keeps_bf16_on_ampere_cpu_and_unknown(fields: dict[str, Any]) -> None:
    f = _headroom(**fields)
    assert f.prescription.knobs == {"checkpointing": True, "precision": "bf16"}
    assert "GradScaler" not in f.prescription.code_change
    assert "cuda_capability" not in f.evidence


def test_memory_headroom_leaves_a_lower_precision_alone_on_any_gpu() -> None:
    for cap in (V100, A100):
        f = _headroom(device="cuda", cuda_capability=cap, config=ConfigEvidence(precision="fp16"))
        assert f.prescription.knobs == {"checkpointing": True}


def test_lower_precision_picks_fp16_when_the_capability_rules_out_bf16() -> None:
    # Measured peaks where bf16 looks best (as an emulation might time on a small GEMM): the
    # capability, not the number, decides that bf16 is not a candidate before sm_80.
    tr = TraceEvidence(has_device=True, time_by_bound={"compute": 0.8})
    peaks = CeilingEvidence(
        device="cuda", peak_flops={"float32": 10e12, "bfloat16": 80e12, "float16": 60e12}
    )
    base: dict[str, Any] = {"device": "cuda", "steps": phases(), "trace": tr, "ceilings": peaks}
    old = lower_precision_available.check(evidence(cuda_capability=T4, **base))
    assert old is not None and old.prescription.knobs == {"precision": "fp16"}
    assert "GradScaler" in old.prescription.code_change
    for cap in (A100, None):
        new = lower_precision_available.check(evidence(cuda_capability=cap, **base))
        assert new is not None and new.prescription.knobs == {"precision": "bf16"}
    only_bf16 = peaks.model_copy(update={"peak_flops": {"float32": 10e12, "bfloat16": 80e12}})
    no_fp16 = base | {"ceilings": only_bf16}
    assert lower_precision_available.check(evidence(cuda_capability=V100, **no_fp16)) is None


def _everything_fires(cap: tuple[int, int] | None) -> Evidence:
    """GPU evidence on which the precision-related rules all have something to say."""
    tr = TraceEvidence(has_device=True, computation_pct=90.0, time_by_bound={"compute": 0.9})
    ceilings = CeilingEvidence(
        device="cuda", peak_flops={"float32": 14e12, "bfloat16": 120e12, "float16": 110e12}
    )
    return evidence(
        device="cuda",
        cuda_capability=cap,
        steps=phases(forward=0.4, backward=0.4),
        trace=tr,
        ceilings=ceilings,
        memory=NEAR,
        config=ConfigEvidence(batch_size=32, precision="fp32"),
    )


def _prescribed(ev: Evidence) -> list[tuple[str, object]]:
    found = [f for f in (rule(ev) for rule in RULES.values()) if f is not None]
    return [(k, v) for f in found for k, v in f.prescription.knobs.items()]


def test_no_rule_prescribes_bf16_or_tf32_before_ampere() -> None:
    old = _prescribed(_everything_fires(V100))
    assert ("precision", "fp16") in old
    assert ("precision", "bf16") not in old and ("tf32", True) not in old
    # The same evidence on an A100 (or an unknown GPU) does get bf16: the sweep can fail.
    for cap in (A100, None):
        assert ("precision", "bf16") in _prescribed(_everything_fires(cap))


ENV = {
    "torch_hip": None,
    "cuda_devices": [
        {"index": 0, "name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0"},
        {"index": 1, "name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"},
    ],
}


def test_cuda_capability_from_the_environment_fingerprint() -> None:
    assert cuda_capability_in(ENV, "cuda:0") == V100
    assert cuda_capability_in(ENV, "cuda:1") == A100
    assert cuda_capability_in(ENV, "cuda:2") is None
    assert cuda_capability_in(ENV, "cuda") is None  # mixed GPUs: which one the job used is unknown
    one_kind = {**ENV, "cuda_devices": ENV["cuda_devices"][:1]}  # type: ignore[index]
    assert cuda_capability_in(one_kind, "cuda") == V100
    assert cuda_capability_in(one_kind, "cpu") is None
    assert cuda_capability_in(None, "cuda:0") is None
    rocm = {**one_kind, "torch_hip": "6.2"}  # gfx numbers, not NVIDIA's
    assert cuda_capability_in(rocm, "cuda") is None


def test_evidence_round_trips_the_capability_and_reads_version_1() -> None:
    ev = evidence(device="cuda", cuda_capability=T4)
    data = ev.to_json_dict()
    assert (
        data["version"] == Evidence.schema_version
        and Evidence.from_json_dict(data).cuda_capability == T4
    )
    old = {k: v for k, v in data.items() if k != "cuda_capability"} | {"version": 1}
    assert Evidence.from_json_dict(old).cuda_capability is None


def test_api_fills_the_capability_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Evidence] = []

    def spy(real: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Evidence:
            ev: Evidence = real(*args, **kwargs)
            seen.append(ev)
            return ev

        return wrapped

    monkeypatch.setattr(api, "evidence_from_profile", spy(api.evidence_from_profile))
    api.diagnose_profile(ScriptProfile(argv=["train.py"], device="cuda:0"), environment=ENV)
    api.diagnose_profile(ScriptProfile(argv=["train.py"], device="cuda:1"), environment=ENV)
    api.diagnose_profile(ScriptProfile(argv=["train.py"], device="cuda:0"), environment=None)
    assert [e.cuda_capability for e in seen] == [V100, A100, None]

    # diagnose_run hands the capability to evidence_from_run the same way.
    got: dict[str, Any] = {}

    def fake_from_run(run: Any, analysis: Any, **kwargs: Any) -> Evidence:
        got.update(kwargs)
        return evidence(device=run.device, cuda_capability=kwargs["cuda_capability"])

    monkeypatch.setattr(api, "evidence_from_run", fake_from_run)
    api.diagnose_run(SimpleNamespace(device="cuda:0"), environment=ENV)  # type: ignore[arg-type]
    assert got["cuda_capability"] == V100


# Real traces (tests/data/traces): every NVIDIA one comes from an A100 or H100 (sm_80, sm_90),
# none from a pre-Ampere GPU, so they check that the capability is read, not the fp16 path.
@pytest.mark.parametrize(
    ("name", "cap"),
    [
        ("hta_alexnet_a100.json.gz", A100),
        ("tracelens_h100_bert_small.json.gz", (9, 0)),
        ("hta_mi250_minitoy.json.gz", None),  # ROCm reports gfx90a as "9.0": not NVIDIA's
        ("hta_cpu_only.json.gz", None),
    ],
)
def test_real_trace_capability(name: str, cap: tuple[int, int] | None) -> None:
    from torchdoctor.analyze import analyze_trace

    ev = evidence_from_trace(analyze_trace(TRACES / name))
    assert ev.cuda_capability == cap
