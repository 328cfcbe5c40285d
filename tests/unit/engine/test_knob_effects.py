"""Every knob changes what the session does, checked on the session's objects, not timings."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import nn

from torchdoctor.core.errors import KnobNotApplicable
from torchdoctor.engine import TrainingSession, prepare
from torchdoctor.knobs import Recipe
from torchdoctor.knobs.cuda import apply_cuda_flags, read_cuda_flags, restore_cuda_flags
from torchdoctor.workloads import get_workload
from torchdoctor.workloads.base import Batch


def small_mlp() -> Any:
    return get_workload("mlp", features=8, hidden=16, layers=1, rows=256, batch_size=16)


#: The small cnn's first width: its stride-2 1x1 shortcuts then take 16 and 32 input
#: channels. With fewer input channels than oneDNN's channel block (8 on AVX2, 16 on
#: AVX-512), the channels_last backward of a stride-2 1x1 convolution writes past its
#: workspace and hangs or crashes with 2 threads (oneDNN issue #6035); width 4 (shortcuts of
#: 4 and 8 channels) hung this test on the AVX2-only AMD EPYC host; the session now refuses
#: channels_last for such a model (see the refusal test below).
SMALL_CNN_WIDTH = 16


def small_cnn() -> Any:
    return get_workload("cnn", width=SMALL_CNN_WIDTH, images=64, decode_cost_us=0, batch_size=8)


def small_gpt() -> Any:
    return get_workload("gpt", block=16, layers=2, heads=2, embd=16, characters=2048, batch_size=4)


def session(workload: Any, *settings: str) -> TrainingSession:
    return prepare(workload, Recipe.parse(list(settings)), device="cpu", seed=0)


def count_calls(module: nn.Module) -> list[Any]:
    calls: list[Any] = []
    module.register_forward_hook(lambda _m, args, out: calls.append((args, out)))
    return calls


def test_batch_size_changes_batch_shape() -> None:
    with session(small_mlp(), "batch_size=5") as s:
        calls = count_calls(s.raw_model)
        (step,) = s.run_steps(1, measure_phases=True)
    assert calls[0][0][0].shape == (5, 8)
    assert step.samples == 5


def test_grad_accum_runs_k_micro_steps_per_optimizer_step() -> None:
    with session(small_mlp(), "grad_accum=3") as s:
        calls = count_calls(s.raw_model)
        optimizer_steps: list[int] = []
        s.optimizer.register_step_post_hook(lambda *_: optimizer_steps.append(1))
        steps = s.run_steps(2, measure_phases=False)
    assert len(calls) == 6 and len(optimizer_steps) == 2
    assert [st.samples for st in steps] == [48, 48]


def test_num_workers_starts_that_many_worker_processes() -> None:
    with session(small_mlp(), "num_workers=2") as s:
        s.run_steps(1, measure_phases=False)
        iterator = s.batches.iterator
        assert s.loader.num_workers == 2
        workers = iterator._workers  # type: ignore[union-attr]
        assert len(workers) == 2 and all(w.is_alive() for w in workers)


def test_persistent_workers_and_prefetch_factor_reach_the_loader() -> None:
    with session(small_mlp(), "num_workers=1", "persistent_workers=true", "prefetch_factor=4") as s:
        assert s.loader.persistent_workers is True
        assert s.loader.prefetch_factor == 4
    with session(small_mlp(), "num_workers=1") as s:
        assert s.loader.persistent_workers is False and s.loader.prefetch_factor == 2


def test_pin_memory_reaches_the_loader() -> None:
    # pin_memory is rejected on a CPU device, so build the session directly (no GPU needed to
    # check the plumbing; the loader only pins when it is iterated).
    recipe = Recipe({"pin_memory": True})
    with TrainingSession(small_mlp(), recipe, device=torch.device("cpu"), seed=0) as s:
        assert s.loader.pin_memory is True
    with session(small_mlp()) as s:
        assert s.loader.pin_memory is False


class RecordingWorkload:
    """Wraps a workload and records the non_blocking flag of every host-to-device copy."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.flags: list[bool] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def to_device(self, batch: Batch, device: torch.device, *, non_blocking: bool) -> Batch:
        self.flags.append(non_blocking)
        return self.inner.to_device(batch, device, non_blocking=non_blocking)  # type: ignore[no-any-return]


@pytest.mark.parametrize("value", [True, False])
def test_non_blocking_is_passed_to_the_copy(value: bool) -> None:
    wl = RecordingWorkload(small_mlp())
    recipe = Recipe({"non_blocking": value})
    with TrainingSession(wl, recipe, device=torch.device("cpu"), seed=0) as s:  # type: ignore[arg-type]
        s.run_steps(2, measure_phases=True)
    assert wl.flags == [value, value]


def test_bf16_precision_runs_the_forward_in_bf16() -> None:
    with session(small_mlp(), "precision=bf16") as s:
        first_linear = s.raw_model[0]
        calls = count_calls(first_linear)
        s.run_steps(1, measure_phases=False)
        assert s.scaler is None
    assert calls[0][1].dtype == torch.bfloat16
    with session(small_mlp()) as s:
        calls = count_calls(s.raw_model[0])
        s.run_steps(1, measure_phases=False)
    assert calls[0][1].dtype == torch.float32


def test_fp16_precision_uses_a_grad_scaler() -> None:
    with session(small_mlp(), "precision=fp16") as s:
        calls = count_calls(s.raw_model[0])
        s.run_steps(1, measure_phases=False)
        assert isinstance(s.scaler, torch.amp.GradScaler)
        assert s.scaler.get_scale() > 1  # loss scaling is active
    assert calls[0][1].dtype == torch.float16


def test_compile_dynamic_is_passed_to_torch_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []

    def fake_compile(model: nn.Module, **kwargs: Any) -> nn.Module:
        seen.append(kwargs)
        return model

    monkeypatch.setattr(torch, "compile", fake_compile)
    with session(small_mlp(), "compile=max-autotune", "compile_dynamic=true"):
        pass
    with session(small_mlp(), "compile=default"):
        pass
    assert seen == [
        {"mode": "max-autotune", "dynamic": True},
        {"mode": None, "dynamic": False},
    ]


def test_channels_last_converts_weights_and_inputs() -> None:
    with session(small_cnn(), "channels_last=true") as s:
        conv = s.raw_model.stem[0]
        calls = count_calls(conv)
        s.run_steps(1, measure_phases=False)
        assert conv.weight.is_contiguous(memory_format=torch.channels_last)
        assert not conv.weight.is_contiguous()
    assert calls[0][0][0].is_contiguous(memory_format=torch.channels_last)
    with session(small_cnn()) as s:
        assert s.raw_model.stem[0].weight.is_contiguous()


def test_channels_last_is_refused_where_onednn_would_mistrain_the_model() -> None:
    # Width 4: shortcuts of 4 and 8 input channels, which the session refuses to train in
    # channels_last on a CPU (`knobs.channels_last_hazard`) instead of hanging in backward.
    threads = torch.get_num_threads()
    narrow = get_workload("cnn", width=4, images=64, decode_cost_us=0, batch_size=8)
    with pytest.raises(KnobNotApplicable, match="oneDNN issue #6035") as refused:
        session(narrow, "channels_last=true", f"threads={max(1, threads - 1)}")
    assert refused.value.knob == "channels_last"
    assert torch.get_num_threads() == threads  # the refused session changed nothing


@pytest.mark.parametrize(
    ("impl", "foreach", "fused"),
    [("for_loop", False, False), ("foreach", True, False), ("fused", False, True)],
)
def test_optimizer_impl_selects_the_implementation(impl: str, foreach: bool, fused: bool) -> None:
    with session(small_mlp(), f"optimizer_impl={impl}") as s:
        s.run_steps(1, measure_phases=False)
        assert bool(s.optimizer.defaults["foreach"]) is foreach
        assert bool(s.optimizer.defaults["fused"]) is fused


@pytest.mark.parametrize("set_to_none", [True, False])
def test_set_to_none_controls_gradients_after_the_step(set_to_none: bool) -> None:
    with session(small_mlp(), f"set_to_none={set_to_none}") as s:
        s.run_steps(1, measure_phases=False)
        grads = [p.grad for p in s.raw_model.parameters()]
    if set_to_none:
        assert all(g is None for g in grads)
    else:
        assert all(g is not None and not g.any() for g in grads)


def test_threads_sets_the_intra_op_thread_count_and_close_restores_it() -> None:
    before = torch.get_num_threads()
    with session(small_mlp(), "threads=1") as s:
        assert torch.get_num_threads() == 1 and s.threads == 1
    assert torch.get_num_threads() == before


@pytest.mark.parametrize(("checkpointing", "forwards_per_step"), [(True, 2), (False, 1)])
def test_checkpointed_blocks_recompute_in_backward(
    checkpointing: bool, forwards_per_step: int
) -> None:
    with session(small_gpt(), f"checkpointing={checkpointing}") as s:
        # Hook the block's first layer: the checkpoint wrapper replaces the block's own forward,
        # and recomputation stops early once the last saved tensor is rebuilt.
        calls = count_calls(s.raw_model.blocks[0].attn.qkv)
        s.run_steps(1, measure_phases=False)
        assert s.checkpointed_blocks == (2 if checkpointing else 0)
    assert len(calls) == forwards_per_step


def test_recsys_checkpoints_its_two_mlps_and_trains_alike() -> None:
    small = {"dense": 4, "tables": 2, "rows": 64, "dim": 8, "impressions": 256, "batch_size": 32}
    losses = {}
    for checkpointing in (False, True):
        with session(get_workload("recsys", **small), f"checkpointing={checkpointing}") as s:
            losses[checkpointing] = [r.loss for r in s.run_steps(2, measure_phases=False)]
            assert s.checkpointed_blocks == (2 if checkpointing else 0)
    # Recomputation is the same arithmetic: the same losses.
    assert losses[True] == pytest.approx(losses[False], rel=1e-6)


def test_checkpointing_is_rejected_for_a_workload_without_blocks() -> None:
    from torchdoctor.core.errors import KnobError

    with pytest.raises(KnobError, match="checkpointing"):
        session(small_mlp(), "checkpointing=true")


def test_cuda_flags_are_set_and_restorable() -> None:
    before = read_cuda_flags()
    previous = apply_cuda_flags(cudnn_benchmark=True, tf32=True)
    try:
        assert previous == before
        assert torch.backends.cudnn.benchmark is True
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cudnn.allow_tf32 is True
    finally:
        restore_cuda_flags(previous)
    assert read_cuda_flags() == before


@pytest.mark.requires_cuda
def test_cuda_graphs_replay_a_graphed_model() -> None:
    wl = small_mlp()
    recipe = Recipe.parse(["cuda_graphs=true"], workload=wl, device="cuda")
    with prepare(wl, recipe, device="cuda") as s:
        steps = s.run_steps(3, measure_phases=True)
        # make_graphed_callables patches the module's forward in place (it returns the module
        # it was given): a replay writes into the graph's static output, so two calls return
        # the same storage, where eager calls allocate a new output each time.
        inputs = s._sample_inputs()
        first, second = s.model(inputs), s.model(inputs)
        assert first.data_ptr() == second.data_ptr()
        assert s.replays_graphs
    assert all(st.loss is not None and math.isfinite(st.loss) for st in steps)
