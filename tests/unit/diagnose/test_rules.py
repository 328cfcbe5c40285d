"""Each rule fires on constructed evidence just past its threshold and not just below it."""

from __future__ import annotations

from diagnose_builders import evidence, phases

from torchdoctor.diagnose.evidence import (
    CeilingEvidence,
    CompileEvidence,
    ConfigEvidence,
    CopyEvidence,
    DataLoaderEvidence,
    MemoryEvidence,
    SyncEvidence,
    ThreadEvidence,
    TraceEvidence,
    UsageEvidence,
)
from torchdoctor.diagnose.rules import (
    channels_last,
    compile_graph_breaks,
    cpu_threads,
    cudnn_benchmark_off,
    dataloader_wait,
    ddp_communication,
    eval_without_no_grad,
    framework_overhead,
    host_sync,
    lower_precision_available,
    memory_bound_elementwise,
    memory_headroom,
    optimizer_share,
    pageable_h2d,
    zero_grad_set_to_none,
)

DL0 = DataLoaderEvidence(uses_dataloader=True, num_workers=0)


def test_dataloader_wait_boundary_and_prescription() -> None:
    low = dataloader_wait.MIN_SHARE - 0.001
    assert dataloader_wait.check(evidence(steps=phases(data_wait=low), dataloader=DL0)) is None
    f = dataloader_wait.check(
        evidence(
            steps=phases(data_wait=0.4),
            dataloader=DL0,
            threads=ThreadEvidence(torch_threads=2, usable_cores=4),
        )
    )
    assert f is not None and f.severity == "high" and f.bottleneck == "data_loading"
    assert f.prescription.knobs["num_workers"] == 3
    assert f.amdahl_bound == 1 / (1 - 0.4)


def test_host_sync_needs_syncs_and_time() -> None:
    syncs = SyncEvidence(per_step={"item": 3.0})
    few = SyncEvidence(per_step={"item": 1.0})
    assert host_sync.check(evidence(steps=phases(other=0.3), syncs=few)) is None
    assert host_sync.check(evidence(steps=phases(other=0.04), syncs=syncs)) is None
    f = host_sync.check(evidence(steps=phases(other=0.3), syncs=syncs))
    assert f is not None and f.bottleneck == "host_sync" and f.evidence["syncs_per_step"] == 3.0


def test_framework_overhead_gpu_idle_and_cpu_tiny_ops() -> None:
    busy = TraceEvidence(has_device=True, idle_pct=49.0, computation_pct=51.0)
    idle = TraceEvidence(has_device=True, idle_pct=92.0, computation_pct=8.0)
    assert framework_overhead.check(evidence(source="trace", device="cuda", trace=busy)) is None
    f = framework_overhead.check(evidence(source="trace", device="cuda", trace=idle))
    assert f is not None and f.share == 0.92 and "cuda_graphs" in f.prescription.knobs
    tiny = TraceEvidence(
        has_device=False,
        time_by_bound={"overhead": 0.4, "unknown": 0.6},
        ops_per_step=3000,
        step_breakdown={"CPU Exec": 0.7, "Other": 0.3},
    )
    f = framework_overhead.check(evidence(steps=phases(other=0.8), trace=tiny))
    assert f is not None and f.share == 0.7
    few = tiny.model_copy(update={"ops_per_step": 999})
    assert framework_overhead.check(evidence(steps=phases(other=0.8), trace=few)) is None


def test_framework_overhead_batch_scaling() -> None:
    from torchdoctor.diagnose.evidence import BatchScalingEvidence

    flat = BatchScalingEvidence(points={32: 0.10, 64: 0.11})
    linear = BatchScalingEvidence(points={32: 0.10, 64: 0.19})
    assert framework_overhead.check(evidence(steps=phases(), batch_scaling=linear)) is None
    f = framework_overhead.check(evidence(steps=phases(), batch_scaling=flat))
    assert f is not None and f.evidence["step_growth_per_batch_doubling"] == 1.1


def test_memory_bound_elementwise_and_compiled() -> None:
    tr = TraceEvidence(has_device=False, elementwise_time_frac=0.3)
    assert memory_bound_elementwise.check(evidence(steps=phases(), trace=tr)) is not None
    compiled = ConfigEvidence(compiled=True)
    assert (
        memory_bound_elementwise.check(evidence(steps=phases(), trace=tr, config=compiled)) is None
    )
    low = tr.model_copy(update={"elementwise_time_frac": 0.19})
    assert memory_bound_elementwise.check(evidence(steps=phases(), trace=low)) is None


def test_lower_precision_silent_when_measured_slower() -> None:
    tr = TraceEvidence(has_device=False, time_by_bound={"compute": 0.8})
    slower = CeilingEvidence(device="cpu", peak_flops={"fp32": 1e11, "bf16": 0.5e11})
    faster = CeilingEvidence(device="cuda", peak_flops={"float32": 1e13, "bfloat16": 1e14})
    assert (
        lower_precision_available.check(evidence(steps=phases(), trace=tr, ceilings=slower)) is None
    )
    f = lower_precision_available.check(evidence(steps=phases(), trace=tr, ceilings=faster))
    assert f is not None and f.prescription.knobs == {"precision": "bf16"}
    bf16_run = ConfigEvidence(precision="bf16")
    assert (
        lower_precision_available.check(
            evidence(steps=phases(), trace=tr, ceilings=faster, config=bf16_run)
        )
        is None
    )


def test_lower_precision_prescribes_fp16_on_a_pre_ampere_gpu() -> None:
    # The precision knob refuses bf16 before Ampere (sm_80), so the rule must not prescribe it
    # there: a V100's datasheet lists no bf16 peak, and where torch emulates bf16 its measured
    # peak is far below the fp16 tensor cores', so fp16 (with its GradScaler) wins.
    from torchdoctor.analyze.devices import datasheet_ceilings

    v100 = datasheet_ceilings("Tesla V100-SXM2-32GB")
    assert v100 is not None
    tr = TraceEvidence(has_device=True, time_by_bound={"compute": 0.8})
    sheets = CeilingEvidence(device="cuda", peak_flops=v100.peak_flops, source=v100.source)
    emulated = CeilingEvidence(
        device="cuda", peak_flops={"float32": 14e12, "bfloat16": 15e12, "float16": 110e12}
    )
    for ceilings in (sheets, emulated):
        f = lower_precision_available.check(evidence(steps=phases(), trace=tr, ceilings=ceilings))
        assert f is not None and f.prescription.knobs == {"precision": "fp16"}
        assert "GradScaler" in f.prescription.code_change


def test_channels_last() -> None:
    tr = TraceEvidence(has_device=False, conv_time_frac=0.5)
    assert channels_last.check(evidence(steps=phases(), trace=tr)) is not None
    cl = ConfigEvidence(channels_last=True)
    assert channels_last.check(evidence(steps=phases(), trace=tr, config=cl)) is None
    few = tr.model_copy(update={"conv_time_frac": 0.19})
    assert channels_last.check(evidence(steps=phases(), trace=few)) is None


def test_optimizer_share_boundary() -> None:
    assert optimizer_share.check(evidence(steps=phases(optimizer=0.099))) is None
    f = optimizer_share.check(evidence(steps=phases(optimizer=0.3)))
    assert f is not None and f.prescription.knobs == {"optimizer_impl": "foreach"}
    fused = ConfigEvidence(optimizer_impl="fused")
    assert optimizer_share.check(evidence(steps=phases(optimizer=0.3), config=fused)) is None


def test_zero_grad_and_eval_rules() -> None:
    assert zero_grad_set_to_none.check(evidence(steps=phases(), usage=UsageEvidence())) is None
    kept = UsageEvidence(zero_grad_calls=10, zero_grad_keep_calls=10)
    f = zero_grad_set_to_none.check(evidence(steps=phases(other=0.1), usage=kept))
    assert f is not None and f.prescription.knobs == {"set_to_none": True}
    assert eval_without_no_grad.check(evidence(usage=UsageEvidence(forward_calls=10))) is None
    wasted = UsageEvidence(forward_calls=10, grad_forwards_without_backward=2)
    assert eval_without_no_grad.check(evidence(steps=phases(), usage=wasted)) is not None


def test_cpu_threads_oversubscribed_and_underused() -> None:
    fine = ThreadEvidence(torch_threads=2, usable_cores=2)
    assert cpu_threads.check(evidence(steps=phases(), threads=fine)) is None
    over = ThreadEvidence(torch_threads=4, usable_cores=2)
    assert cpu_threads.check(evidence(steps=phases(), threads=over)) is not None
    under = ThreadEvidence(torch_threads=1, usable_cores=8)
    f = cpu_threads.check(evidence(steps=phases(), threads=under))
    assert f is not None and f.prescription.knobs == {"threads": 8}
    # one thread per rank is right for 2 ranks on 2 cores
    ranks = ThreadEvidence(torch_threads=1, usable_cores=2)
    assert cpu_threads.check(evidence(steps=phases(), threads=ranks, world_size=2)) is None


def _threads(threads: int, cores: int, workers: int, world: int = 1) -> dict[str, object] | None:
    """cpu_threads' prescription for a process of `threads` intra-op threads and `workers`
    loader workers, one of `world` on `cores` cores (None: no finding)."""
    f = cpu_threads.check(
        evidence(
            steps=phases(),
            world_size=world,
            threads=ThreadEvidence(torch_threads=threads, usable_cores=cores),
            dataloader=DataLoaderEvidence(uses_dataloader=True, num_workers=workers),
        )
    )
    return None if f is None else dict(f.prescription.knobs)


def test_cpu_threads_leaves_the_loader_workers_their_cores() -> None:
    # Threads and workers share a process's cores: the count that fills the share beside the
    # workers is what both branches prescribe, the summary's "threads + workers <= cores".
    assert _threads(8, 8, 2) == {"threads": 6}
    assert _threads(4, 8, 4) is None  # 4 + 4 fill the 8 cores: more threads would not fit
    assert _threads(2, 8, 4) == {"threads": 4}
    assert _threads(2, 4, 1, world=2) == {"threads": 1}


def test_cpu_threads_prescribes_no_change_it_cannot_make() -> None:
    # One thread already and the workers fill the cores: fewer threads do not exist, and
    # the workers are the loader's finding (or ranks_oversubscribed's), not this one's.
    assert _threads(1, 2, 2) is None
    assert _threads(1, 4, 2, world=2) is None


def test_pageable_h2d_gpu_only() -> None:
    copies = CopyEvidence(calls=10, pinned_calls=0)
    assert pageable_h2d.check(evidence(steps=phases(h2d=0.2), copies=copies)) is None  # cpu
    f = pageable_h2d.check(evidence(device="cuda", steps=phases(h2d=0.2), copies=copies))
    assert f is not None and f.bottleneck == "host_device_transfer"
    pinned = CopyEvidence(calls=10, pinned_calls=6)
    assert pageable_h2d.check(evidence(device="cuda", steps=phases(h2d=0.2), copies=pinned)) is None


def test_cudnn_benchmark_off() -> None:
    tr = TraceEvidence(has_device=True, conv_time_frac=0.5, computation_pct=80.0)
    off = ConfigEvidence(cudnn_benchmark=False)
    assert cudnn_benchmark_off.check(evidence(device="cuda", trace=tr, config=off)) is not None
    assert cudnn_benchmark_off.check(evidence(device="cpu", trace=tr, config=off)) is None
    on = ConfigEvidence(cudnn_benchmark=True)
    assert cudnn_benchmark_off.check(evidence(device="cuda", trace=tr, config=on)) is None


def test_compile_graph_breaks() -> None:
    assert compile_graph_breaks.check(evidence(compile=CompileEvidence(recompiles=1))) is None
    f = compile_graph_breaks.check(evidence(steps=phases(), compile=CompileEvidence(recompiles=3)))
    assert f is not None and f.prescription.knobs == {"compile_dynamic": True}
    assert compile_graph_breaks.check(evidence(compile=CompileEvidence(graph_breaks=1))) is not None


def test_memory_headroom_both_ends() -> None:
    near = MemoryEvidence(peak_bytes=95, limit_bytes=100)
    mid = MemoryEvidence(peak_bytes=50, limit_bytes=100)
    far = MemoryEvidence(peak_bytes=10, limit_bytes=100)
    assert memory_headroom.check(evidence(memory=mid)) is None
    f = memory_headroom.check(evidence(memory=near))
    assert f is not None and f.prescription.knobs["checkpointing"] is True
    cfg = ConfigEvidence(batch_size=32)
    f = memory_headroom.check(evidence(device="cuda", memory=far, config=cfg))
    assert f is not None and f.prescription.knobs == {"batch_size": 64}


def test_ddp_communication() -> None:
    hidden = TraceEvidence(has_device=True, comm_share=0.3, comm_exposed_share=0.05)
    exposed = TraceEvidence(has_device=True, comm_share=0.3, comm_exposed_share=0.2)
    assert ddp_communication.check(evidence(trace=hidden)) is None
    f = ddp_communication.check(evidence(trace=exposed, world_size=8))
    assert f is not None and f.bottleneck == "communication" and f.share == 0.2
