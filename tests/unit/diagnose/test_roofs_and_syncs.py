"""Per-precision roofs, work-based overhead class, measured sync share, and the recorder
not charging the profiler's start/stop to a step."""

from __future__ import annotations

from diagnose_builders import evidence, phases

from torchdoctor.analyze.records import CeilingsInfo, OpRow
from torchdoctor.collect.step_recorder import StepRecorder
from torchdoctor.diagnose.evidence import SyncEvidence
from torchdoctor.diagnose.from_trace import _row_bound, roofs_for
from torchdoctor.diagnose.primary import non_op_other_share
from torchdoctor.diagnose.rules import host_sync

# A CPU with AMX: bf16 peak ~7.5x fp32 (the shape of this project's dev machine).
CEILINGS = CeilingsInfo(
    device="cpu",
    device_name="test cpu",
    source="measured",
    peak_flops={"float32": 60e9, "bfloat16": 450e9},
    mem_bandwidth_bytes_per_s=6e9,
)


def _row(name: str, flops: float | None, nbytes: float | None, count: int, bound: str) -> OpRow:
    return OpRow(
        name=name,
        count=count,
        self_host_us=1000.0,
        total_host_us=1000.0,
        device_us=0.0,
        flops=flops,
        bytes=nbytes,
        intensity=flops / nbytes if flops and nbytes else None,
        achieved_flops_per_s=None,
        achieved_bytes_per_s=None,
        bound=bound,
    )


def test_fp32_gemm_is_compute_bound_under_fp32_roofs() -> None:
    # intensity 40 FLOP/B: above the fp32 ridge (10), below the bf16 one (75).
    gemm = _row("aten::mm", 40e9, 1e9, 10, "memory")
    assert _row_bound(gemm, roofs_for(CEILINGS, "fp32")) == "compute"
    assert _row_bound(gemm, roofs_for(CEILINGS, "bf16")) == "memory"
    assert _row_bound(gemm, None) == "memory"  # no precision known: the analyzer's class


def test_tiny_work_and_autograd_wrappers_are_overhead() -> None:
    roofs = roofs_for(CEILINGS, "fp32")
    tiny = _row("aten::mul", None, 200.0 * 100, 100, "")  # 200 B per call: ~0.03 µs ideal
    assert _row_bound(tiny, roofs) == "overhead"
    wrapper = _row("autograd::engine::evaluate_function: TanhBackward0", None, None, 5, "")
    assert _row_bound(wrapper, roofs) == "overhead"
    big = _row("aten::add_", None, 6e9, 100, "")  # 10 ms of traffic per call
    assert _row_bound(big, roofs) == "unknown"


def test_host_sync_prefers_measured_time_inside_syncs() -> None:
    syncs = SyncEvidence(per_step={"print": 2.0, "item": 8.0}, time_share=0.6)
    f = host_sync.check(evidence(steps=phases(other=0.9), syncs=syncs))
    assert f is not None and f.share == 0.6 and f.evidence["sync_time_share"] == 0.6
    cheap = SyncEvidence(per_step={"item": 8.0}, time_share=0.01)
    assert host_sync.check(evidence(steps=phases(other=0.9), syncs=cheap)) is None


def test_other_host_share_excludes_sync_time_outside_phases() -> None:
    syncs = SyncEvidence(per_step={"print": 1.0}, time_share=0.7, outside_phases_share=0.6)
    ev = evidence(steps=phases(other=0.8), syncs=syncs)
    assert abs(non_op_other_share(ev, 0.8) - 0.2) < 1e-9


class _FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def mark(self) -> float:
        return self.now

    def seconds(self, start: float, end: float) -> float:
        return end - start


def test_step_end_callback_time_is_not_charged_to_the_next_step() -> None:
    clock = _FakeClock()

    def slow_callback(_closed: int) -> None:
        clock.now += 5.0  # the profiler starting or writing its trace

    rec = StepRecorder(clock, on_step_end=slow_callback)
    rec.optimizer_exists = True
    for _ in range(2):
        rec.begin("forward")
        clock.now += 0.01
        rec.end("forward")
        rec.begin("optimizer")
        clock.now += 0.01
        rec.end("optimizer")
        rec.optimizer_step_end()
    rec.finish()
    assert [round(s.total_s, 6) for s in rec.steps] == [0.02, 0.02]
