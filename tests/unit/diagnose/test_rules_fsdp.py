"""The FSDP2 rules on constructed evidence: each fires on a rank's FSDP analysis just past its
condition, not below it, with its Amdahl bound and the FSDP knob it prescribes; and the DDP
communication rule leaves an FSDP job to them."""

from __future__ import annotations

import math
from typing import Any

import pytest
from diagnose_builders import evidence, phases

from torchdoctor.analyze.fsdp_records import FsdpAnalysis, FsdpUnit
from torchdoctor.diagnose.evidence import MemoryEvidence, TraceEvidence
from torchdoctor.diagnose.findings import LOW_SHARE, amdahl_bound
from torchdoctor.diagnose.rules import (
    RULES,
    ddp_communication,
    fsdp_exposed_all_gather,
    fsdp_fp32_communication,
    fsdp_reshard_after_forward,
    fsdp_root_only_wrap,
)
from torchdoctor.knobs import FSDP_WRAP

STEP_MS = 100.0
MIB = 2**20


def unit(name: str, **fields: Any) -> FsdpUnit:
    base: dict[str, Any] = {
        "unsharded_bytes": MIB,
        "param_dtype": "bfloat16",
        "reduce_dtype": "bfloat16",
        "reduce_bytes": MIB,
        "forward_all_gathers": 1.0,
        "backward_all_gathers": 0.0,
        "forward_prefetched": 1.0,
        "backward_prefetched": 0.0,
    }
    return FsdpUnit(name=name, **{**base, **fields})


def analysis(units: list[FsdpUnit], **fields: Any) -> FsdpAnalysis:
    return FsdpAnalysis(
        steps=5,
        step_ms=STEP_MS,
        world_size=2,
        collective_events="gloo:/nccl: annotations",
        units=units,
        **fields,
    )


def blocks(n: int = 4, **fields: Any) -> list[FsdpUnit]:
    return [unit("root", forward_prefetched=0.0)] + [
        unit(f"blocks.{i}", **fields) for i in range(n)
    ]


def test_exposed_all_gather_names_prefetch_when_none_is_issued() -> None:
    def check(exposed_ms: float, prefetched: float) -> Any:
        f = analysis(
            blocks(),
            all_gather_ms=30.0,
            exposed_all_gather_ms=exposed_ms,
            exposed_forward_all_gather_ms=exposed_ms,
            exposed_comm_ms=exposed_ms,
            prefetched_all_gathers=prefetched,
        )
        return fsdp_exposed_all_gather.check(evidence(fsdp=f))

    threshold_ms = fsdp_exposed_all_gather.MIN_EXPOSED_SHARE * STEP_MS
    assert check(threshold_ms * 0.99, 0.0) is None
    found = check(20.0, 0.0)
    assert found is not None and found.prescription.knobs == {"fsdp_prefetch": 1}
    assert found.share == 0.2 and found.amdahl_bound == pytest.approx(amdahl_bound(0.2))
    assert found.evidence["hidden"] == pytest.approx(1 - 20 / 30, abs=1e-4)  # 4 places kept
    # prefetch on and still exposed: the cure is larger units or more work, not prefetch
    on = check(20.0, fsdp_exposed_all_gather.PREFETCH_ON_SHARE)
    assert on is not None and not on.prescription.knobs
    assert "fewer, larger units" in on.prescription.code_change


def test_exposed_all_gather_leaves_a_single_unit_to_the_root_only_rule() -> None:
    f = analysis([unit("root", forward_prefetched=0.0)], exposed_all_gather_ms=50.0)
    assert fsdp_exposed_all_gather.check(evidence(fsdp=f)) is None
    assert fsdp_exposed_all_gather.check(evidence()) is None  # not an FSDP job


def _reshard(peak: int, limit: int | None, exposed_ms: float = 10.0) -> Any:
    f = analysis(
        blocks(4, backward_all_gathers=1.0, backward_all_gather_ms=4.0),
        backward_all_gathers=4.0,
        exposed_backward_all_gather_ms=exposed_ms,
        exposed_all_gather_ms=exposed_ms,
        exposed_comm_ms=exposed_ms,
    )
    memory = MemoryEvidence(peak_bytes=peak, limit_bytes=limit) if limit is not None else None
    return fsdp_reshard_after_forward.check(evidence(fsdp=f, memory=memory))


def test_reshard_after_forward_fires_only_with_memory_to_spare() -> None:
    gib = 2**30
    found = _reshard(peak=100 * MIB, limit=gib)
    assert found is not None and found.prescription.knobs == {"reshard_after_forward": False}
    assert found.evidence["extra_bytes"] == 4 * MIB  # the four re-gathered blocks
    assert found.share == 0.1 and found.local_speedup is None
    # the peak plus the blocks kept unsharded would pass 90% of the limit: no finding
    spare = fsdp_reshard_after_forward.SPARE_BELOW
    assert _reshard(peak=math.ceil(spare * gib) - 4 * MIB, limit=gib) is None
    assert _reshard(peak=int(spare * gib) - 5 * MIB, limit=gib) is not None
    assert _reshard(peak=100 * MIB, limit=None) is None  # no limit known: cannot tell
    # re-gathers that leave too little exposed are not worth the memory
    assert _reshard(peak=100 * MIB, limit=gib, exposed_ms=LOW_SHARE * STEP_MS * 0.99) is None


def test_reshard_after_forward_needs_re_gathers() -> None:
    f = analysis(blocks(), exposed_all_gather_ms=20.0, exposed_comm_ms=20.0)
    ev = evidence(fsdp=f, memory=MemoryEvidence(peak_bytes=MIB, limit_bytes=2**30))
    assert fsdp_reshard_after_forward.check(ev) is None


def test_fp32_reduce_under_bf16_parameters_is_found_with_half_the_bytes_bound() -> None:
    def check(reduce_dtype: str, exposed_ms: float, param_dtype: str = "bfloat16") -> Any:
        units = blocks(
            4,
            reduce_dtype=reduce_dtype,
            param_dtype=param_dtype,
            reduce_bytes=2 * MIB,
            reduce_scatter_exposed_ms=exposed_ms / 4,
        )
        f = analysis(units, exposed_reduce_scatter_ms=exposed_ms, exposed_comm_ms=exposed_ms)
        return fsdp_fp32_communication.check(evidence(fsdp=f))

    assert check("bfloat16", 40.0) is None
    found = check("float32", 40.0)
    assert found is not None and found.prescription.knobs == {"fsdp_mixed_precision": "bf16"}
    assert found.local_speedup == fsdp_fp32_communication.BF16_SPEEDUP
    assert found.share == pytest.approx(0.4)
    assert found.amdahl_bound == pytest.approx(1 / (1 - 0.4 * 0.5))
    assert found.evidence["fp32_reduce_units"] == 4
    assert found.evidence["param_dtype"] == "bfloat16"
    assert check("float32", LOW_SHARE * STEP_MS * 0.99) is None
    # fp32 parameters too: their all-gathers are fp32 communication as well
    both = check("float32", 40.0, param_dtype="float32")
    assert both is not None and both.evidence["fp32_all_gather_units"] == 4


def test_root_only_wrap_is_one_root_unit() -> None:
    root = unit("root", forward_prefetched=0.0, unsharded_bytes=64 * MIB)
    f = analysis([root], exposed_comm_ms=30.0, unsharded_peak_bytes=64 * MIB)
    found = fsdp_root_only_wrap.check(evidence(fsdp=f))
    assert found is not None and found.prescription.knobs == {FSDP_WRAP.name: "block"}
    assert found.share == 0.3 and "64.0 MiB" in found.summary
    per_block = analysis(blocks(), exposed_comm_ms=30.0)
    assert fsdp_root_only_wrap.check(evidence(fsdp=per_block)) is None
    quiet = analysis([root], exposed_comm_ms=LOW_SHARE * STEP_MS * 0.99)
    assert fsdp_root_only_wrap.check(evidence(fsdp=quiet)) is None


def test_ddp_communication_leaves_an_fsdp_job_to_the_fsdp_rules() -> None:
    trace = TraceEvidence(has_device=False, comm_share=0.4, comm_exposed_share=0.4)
    steps = phases(forward=0.3, backward=0.5)
    assert ddp_communication.check(evidence(steps=steps, trace=trace)) is not None
    fsdp = analysis(blocks(), exposed_comm_ms=40.0)
    assert ddp_communication.check(evidence(steps=steps, trace=trace, fsdp=fsdp)) is None


def test_every_fsdp_rule_is_registered() -> None:
    for module in (
        fsdp_exposed_all_gather,
        fsdp_reshard_after_forward,
        fsdp_fp32_communication,
        fsdp_root_only_wrap,
    ):
        assert RULES[module.RULE_ID] is module.check


def test_a_ranks_measured_step_memory_is_its_memory_evidence() -> None:
    import psutil

    from torchdoctor.collect.script_profile import DistributedInfo, ScriptProfile
    from torchdoctor.core.memory_owners import StepMemory
    from torchdoctor.diagnose.api import profile_evidence

    step = StepMemory(
        batch_size=8,
        device="cpu",
        source="tensors",
        parameters_bytes=MIB,
        gradients_bytes=MIB,
        optimizer_state_bytes=2 * MIB,
        activations_bytes=MIB,
        phase_peaks={"forward_backward": 5 * MIB, "optimizer": 6 * MIB},
    )
    rank = DistributedInfo(local_world_size=2)
    ev = profile_evidence(ScriptProfile(argv=["train.py"], memory=step, distributed=rank))
    # the step's highest phase peak, against the host's memory shared by its 2 local ranks
    assert ev.memory == MemoryEvidence(
        peak_bytes=6 * MIB, limit_bytes=psutil.virtual_memory().total // 2
    )
    assert profile_evidence(ScriptProfile(argv=["train.py"])).memory is None


def test_a_stragglers_wait_leaves_the_fsdp_exposure_in_proportion() -> None:
    from torchdoctor.diagnose.ranks import fsdp_less_wait

    f = analysis(
        blocks(),
        exposed_all_gather_ms=30.0,
        exposed_forward_all_gather_ms=30.0,
        exposed_reduce_scatter_ms=10.0,
        exposed_comm_ms=40.0,
    )
    less = fsdp_less_wait(f, wait_share=0.1)  # 10 ms of the 100 ms step: a quarter of 40
    assert less.exposed_comm_ms == pytest.approx(30.0)
    assert less.exposed_all_gather_ms == pytest.approx(22.5)
    assert less.exposed_reduce_scatter_ms == pytest.approx(7.5)
    assert fsdp_less_wait(f, wait_share=0.9).exposed_comm_ms == 0.0
