"""Kernel names across GPU generations and trace schemas: generation, tensor-core use, and
the V100 job traced in the 2021 schema and today's (tests/gpu_traces.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_traces import DATA_US, STEP_US, SYNC_US
from torchdoctor.analyze import analyze_trace, load_trace

TENSOR_CORE_KERNELS = [
    "volta_h884gemm_64x64_ldg8_nn",
    "volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1",
    "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn",
    "ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x4_tn",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>(Params)",
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
    "sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8",
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<sm90_gmma_tile>>",
    "Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0_APM1",
    "igemm_fwd_gtcx_nchw_fp16_bx0_ex1_bt128x128x32_wt32x32x8_mfma",
]
FP32_CUDA_CORE_KERNELS = [
    "volta_sgemm_128x64_nn",
    "implicit_convolve_sgemm",
    "void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, true>",
    "void cudnn::detail::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int)",
    "void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>(int)",
    "volta_scudnn_128x64_relu_interior_nn_v1",
    "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
    "ampere_sgemm_32x32_sliced1x4_tn",
    "turing_sgemm_128x64_nn",
    "void fft2d_r2c_32x32<float, false, 0u, false>(float2*, float const*, int)",
    "Cijk_Ailk_Bljk_SB_MT64x64x8_SN_GRVW4",
    # cuBLAS/cuDNN on sm80/sm90 build fp32 CUDA-core kernels in the xmma framework too
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
    "aligna4_alignc4_execute_kernel__5x_cublas",
    "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma",
    "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nhwc_tilesize128x128x8",
    "sm80_xmma_wgrad_implicit_gemm_indexed_wo_smem_f32f32_f32f32_f32_nhwc_ffma",
]
NEITHER = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
    "volta_dgemm_64x64_nn",
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>(cudnn::ops::nchw)",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
]


@pytest.mark.parametrize("name", TENSOR_CORE_KERNELS)
def test_tensor_core_kernels_across_generations(name: str) -> None:
    from torchdoctor.analyze.kernels import fp32_cuda_core_math, uses_tensor_cores

    assert uses_tensor_cores(name) and not fp32_cuda_core_math(name)


@pytest.mark.parametrize("name", FP32_CUDA_CORE_KERNELS)
def test_fp32_cuda_core_math_is_tensor_core_eligible(name: str) -> None:
    from torchdoctor.analyze.kernels import fp32_cuda_core_math, uses_tensor_cores

    assert fp32_cuda_core_math(name) and not uses_tensor_cores(name)


@pytest.mark.parametrize("name", NEITHER)
def test_other_kernels_are_neither(name: str) -> None:
    from torchdoctor.analyze.kernels import fp32_cuda_core_math, uses_tensor_cores

    assert not fp32_cuda_core_math(name) and not uses_tensor_cores(name)


@pytest.mark.parametrize(
    ("names", "capability", "generation"),
    [
        (["volta_sgemm_128x64_nn", "elementwise"], (7, 0), "Volta"),
        (["sm70_xmma_gemm_f16f16"], (7, 0), "Volta"),
        (["volta_sgemm_128x64_nn", "turing_fp16_s1688gemm_fp16_128x128"], (7, 5), "Turing"),
        (["ampere_sgemm_32x32_sliced1x4_tn", "volta_sgemm_64x64_nn"], (8, 0), "Ampere"),
        (["cutlass_80_tensorop_bf16_s16816gemm", "sm90_xmma_gemm_bf16bf16"], (9, 0), "Hopper"),
        (["void at::native::vectorized_elementwise_kernel<4>"], None, None),
    ],
)
def test_generation_is_the_newest_architecture_named(
    names: list[str], capability: tuple[int, int] | None, generation: str | None
) -> None:
    from torchdoctor.analyze.kernels import generation_from_names

    found = generation_from_names(names)
    assert (found[0], found[1]) == (capability, generation) if found else capability is None


def test_old_schema_input_dims_spelling_reads_in_the_reader_and_the_reference(
    tmp_path: Path,
) -> None:
    # torch 1.8 wrote "Input dims"; the reader takes it, as the event-by-event reference does.
    from reference_reader import reference_load
    from trace_events import op_event, write_trace

    ev = op_event("aten::mm", 0.0, 50.0, cat="Operator", **{"Input dims": [[64, 32], [32, 16]]})
    ev["args"]["Input type"] = ["float", "float"]
    path = write_trace(tmp_path / "t.json", [ev])
    fast = load_trace(path)
    assert fast.flops[0] == 2 * 64 * 32 * 16
    assert reference_load(path).flops.tolist() == [2 * 64 * 32 * 16]
    # The same event in a piece the typed decode declines (a bare array with an instant
    # event lacking "ph"): re-decoded plainly, the old spelling still counts.
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps([ev, {"name": "no phase"}]))
    assert load_trace(bare).flops.tolist() == [2 * 64 * 32 * 16]


def test_v100_trace_in_both_schemas_reads_the_same(v100_trace: Path) -> None:
    ta = analyze_trace(v100_trace)
    assert ta.cuda_capability == (7, 0)
    old = v100_trace.name.endswith(".gz")
    # The 2021 trace has no deviceProperties: the capability and the ceilings are inferred
    # from kernel names, and say so.
    assert ta.cuda_capability_source == ("kernel names" if old else "deviceProperties")
    assert ta.ceilings is not None and ta.ceilings.source == "datasheet"
    assert ("inferred" in ta.ceilings_note) is old
    assert ta.kernels is not None and ta.kernels.generation == "Volta"
    assert ta.kernels.tensor_core_us == 0.0
    assert ta.kernels.fp32_cuda_core_math_us / ta.kernels.kernel_us > 0.75
    assert ta.step_breakdown is not None
    assert ta.step_breakdown["DataLoader"] == pytest.approx(100 * DATA_US / STEP_US, abs=0.5)
    # Every convolution, forward and (legacy cudnn_convolution_backward) backward, is placed
    # on the roofline: shapes and dtypes were read in both schemas.
    convs = [r for r in ta.ops if "convolution" in r.name]
    assert len(convs) == 2 and all(r.bound == "compute" for r in convs)


def test_v100_sync_cost_is_the_idle_it_leaves_not_the_wait(v100_trace: Path) -> None:
    s = analyze_trace(v100_trace).syncs
    assert s.per_step == 2
    assert s.step_us is not None and s.blocked_us == pytest.approx(3 * 2 * SYNC_US)
    # The device idles a third of each step after the last sync (the DataLoader runs then;
    # after the last step's nothing runs again, so two such gaps are seen), but removing the
    # sync gives back at most the time the host was blocked in it.
    assert s.idle_after_us is not None and s.idle_after_us > 2 * DATA_US
    assert s.cost_us is not None and s.cost_us <= s.blocked_us
    assert s.cost_us / s.step_us < 0.01


def _sync_trace(path: Path, *, gap_after_us: float, blocked_us: float) -> Path:
    """A kernel, a stream sync that waits for it, then the next kernel `gap_after_us` later."""
    from trace_events import write_trace

    def dev(name: str, ts: float, dur: float, corr: int) -> dict:
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts,
                "dur": dur, "args": {"correlation": corr}}  # fmt: skip

    def rt(name: str, ts: float, dur: float, corr: int = -1) -> dict:
        return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts,
                "dur": dur, "args": {"correlation": corr}}  # fmt: skip

    sync_end = 100.0 + blocked_us
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 0.0,
            "dur": 10_000.0,
            "args": {},
        },
        rt("cudaLaunchKernel", 10.0, 5.0, 1),
        dev("volta_sgemm_128x64_nn", 20.0, sync_end - 20.0, 1),
        rt("cudaStreamSynchronize", 100.0, blocked_us),
        rt("cudaLaunchKernel", sync_end + gap_after_us - 10.0, 5.0, 2),
        dev("volta_sgemm_128x64_nn", sync_end + gap_after_us, 500.0, 2),
    ]
    return write_trace(path, events)


@pytest.mark.parametrize(
    ("gap_after_us", "blocked_us", "cost_us"),
    [
        (2000.0, 300.0, 300.0),  # the host then idles (data loading): cost <= time blocked
        (40.0, 3000.0, 40.0),  # GPU-bound: long drain, the next launch comes right away
    ],
)
def test_gpu_sync_cost_is_the_device_idle_after_it(
    tmp_path: Path, gap_after_us: float, blocked_us: float, cost_us: float
) -> None:
    s = analyze_trace(_sync_trace(tmp_path / "t.json", gap_after_us=gap_after_us,
                                  blocked_us=blocked_us)).syncs  # fmt: skip
    assert s.blocked_us == pytest.approx(blocked_us)
    assert s.idle_after_us == pytest.approx(gap_after_us)
    assert s.cost_us == pytest.approx(cost_us)


def test_grad_scaler_found_inf_read_is_not_a_sync_point(tmp_path: Path) -> None:
    from trace_events import op_event, write_trace

    events = [
        op_event("ProfilerStep#1", 0.0, 1000.0, cat="user_annotation"),
        op_event("aten::item", 10.0, 30.0),  # the script's loss.item()
        op_event("aten::_local_scalar_dense", 12.0, 25.0),
        op_event("aten::_amp_foreach_non_finite_check_and_unscale_", 100.0, 20.0),
        op_event("aten::item", 130.0, 30.0),  # GradScaler._maybe_opt_step's found_inf.item()
        op_event("aten::_local_scalar_dense", 132.0, 25.0),
        op_event("Optimizer.step#SGD.step", 170.0, 100.0, cat="user_annotation"),
    ]
    s = analyze_trace(write_trace(tmp_path / "t.json", events)).syncs
    assert s.per_step == 1 and s.grad_scaler_reads == 1
    assert s.by_name == {"aten::_local_scalar_dense": 1, "aten::item": 1}
