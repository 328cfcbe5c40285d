"""profile_workload: the trace holds only the active steps; FLOPs per module are exact."""

from __future__ import annotations

import gc
import gzip
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from torchdoctor.collect.profile import ProfileCapture, profile_workload
from torchdoctor.core.errors import CollectError
from torchdoctor.core.rundir import TRACE
from torchdoctor.knobs import Recipe
from torchdoctor.workloads import get_workload

# mlp with features=8, hidden=16, layers=1, classes=4, batch 8: Linear(8,16) ReLU Linear(16,4).
MLP = {"features": 8, "hidden": 16, "layers": 1, "classes": 4, "rows": 64, "batch_size": 8}
# FLOPs of one training step, counted by hand (a multiply-add is 2 FLOPs):
#   Linear(8,16) forward 2*8*8*16 = 2048; backward: weight grad 2048 (the input needs no grad).
#   Linear(16,4) forward 2*8*16*4 = 1024; backward: input grad 1024 + weight grad 1024.
MLP_FLOPS = {"Sequential.0": 4096, "Sequential.2": 3072}

TINY_CONV = textwrap.dedent(
    """
    import torch
    from torch import nn
    from torch.utils.data import TensorDataset
    from torchdoctor.workloads.base import SyntheticWorkload

    class TinyConv(SyntheticWorkload):
        name = "tinyconv"
        description = "Conv2d(1,2,3) on 1x6x6 images, then Linear(32,3)"
        kind = "vision"
        sample_unit = "a 1x6x6 image"
        input_shapes = {"x": (1, 6, 6)}
        default_batch_size = 4

        def build_model(self):
            return nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(32, 3))

        def build_dataset(self, seed):
            g = torch.Generator().manual_seed(seed)
            x = torch.randn(16, 1, 6, 6, generator=g)
            return TensorDataset(x, torch.randint(0, 3, (16,), generator=g))

        def loss(self, output, target):
            return nn.functional.cross_entropy(output, target)

        def build_optimizer(self, params, impl):
            return torch.optim.SGD(params, lr=0.1)

    def factory():
        return TinyConv()
    """
)
# Conv2d(1,2,3) on 4x1x6x6 -> 4x2x4x4: forward 2*N*Cout*16*Cin*9 = 2*4*2*16*1*9 = 2304,
# backward weight grad 2304 (no input grad). Linear(32,3), batch 4: forward 2*4*32*3 = 768,
# backward input grad 768 + weight grad 768.
CONV_FLOPS = {"Sequential.0": 4608, "Sequential.2": 2304}


def _profile(tmp_path: Path, workload: str, **params: object) -> ProfileCapture:
    job = get_workload(workload, **params)
    return profile_workload(
        job, Recipe.parse([], workload=job), tmp_path, wait=1, warmup=1, active=2
    )


def _trace_events(run_dir: Path) -> list[dict[str, object]]:
    with gzip.open(run_dir / TRACE, "rt") as fh:
        events: list[dict[str, object]] = json.load(fh)["traceEvents"]
    return events


def test_trace_holds_the_active_steps_only_and_flops_are_exact(tmp_path: Path) -> None:
    capture = _profile(tmp_path, "mlp", **MLP)
    steps = sorted(
        str(e["name"])
        for e in _trace_events(tmp_path)
        if str(e.get("name")).startswith("ProfilerStep#")
    )
    # Steps 0 (wait) and 1 (warm-up) are not in the trace; steps 2 and 3 are.
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
    assert len(capture.step_times_s) == 2
    by_module = {m.module: m.flops for m in capture.flops_by_module}
    for module, flops in MLP_FLOPS.items():
        assert by_module[module] == flops
    assert capture.flops_per_step == sum(MLP_FLOPS.values())
    assert capture.flops_by_op == {"aten.addmm": 2048 + 1024, "aten.mm": 2048 + 1024 + 1024}
    assert capture.peak_host_rss_bytes and capture.peak_host_rss_bytes > 0
    assert any(row.self_cpu_memory_bytes for row in capture.memory_by_op)
    assert ProfileCapture.from_json_dict(capture.to_json_dict()) == capture
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_conv_layer_flops_of_a_user_workload(tmp_path: Path) -> None:
    script = tmp_path / "tiny.py"
    script.write_text(TINY_CONV)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    capture = _profile(run_dir, f"{script}:factory")
    by_module = {m.module: m for m in capture.flops_by_module}
    for module, flops in CONV_FLOPS.items():
        assert by_module[module].flops == flops
    assert set(by_module["Sequential.0"].by_op) == {"aten.convolution", "aten.convolution_backward"}


@pytest.mark.parametrize(("wait", "warmup", "active"), [(-1, 1, 1), (0, -1, 1), (0, 0, 0)])
def test_bad_window_is_a_collect_error(tmp_path: Path, wait: int, warmup: int, active: int) -> None:
    job = get_workload("mlp", **MLP)
    with pytest.raises(CollectError, match="bad profiling window"):
        profile_workload(job, Recipe.parse([]), tmp_path, wait=wait, warmup=warmup, active=active)


def test_cuda_activity_only_for_a_cuda_device(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from torchdoctor.collect.profile import _activities

    cpu, cuda = torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert _activities(torch.device("cpu")) == [cpu]
    assert _activities(torch.device("cuda:0")) == [cpu, cuda]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _activities(torch.device("cuda:0")) == [cpu]


class GraphReplaySession:
    """A session whose steps replay CUDA graphs: the kernels run, the dispatcher sees none."""

    replays_graphs = True

    def __init__(self) -> None:
        self.model = torch.nn.Linear(64, 32)
        self.replays = 0

    def run_steps(self, n: int, *, measure_phases: bool) -> list[object]:
        self.replays += n  # a graph launch: no aten op is dispatched
        return []

    def eager_step(self) -> None:
        self.model(torch.randn(16, 64)).sum().backward()


def test_flops_under_cuda_graphs_come_from_an_eager_step() -> None:
    from torchdoctor.collect.profile import count_flops, flop_counting_step

    session = GraphReplaySession()
    total, _, _ = count_flops(flop_counting_step(session))
    # forward 2*16*64*32 (addmm), backward the same for the weight's gradient (the input
    # needs none)
    assert total == 2 * (2 * 16 * 64 * 32)
    assert session.replays == 0


class _Replay(torch.autograd.Function):
    """A captured graph's replay as the dispatcher sees it: static buffers come back, no
    matmul is dispatched (the recorded kernels run on the device, outside it), and the
    gradients of the parameters come out of the backward graph's static buffers."""

    @staticmethod
    def forward(ctx: Any, static_out: torch.Tensor, *params: torch.Tensor) -> torch.Tensor:
        ctx.shapes = [p.shape for p in params]
        return static_out.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        return (None, *(grad.new_zeros(shape) for shape in ctx.shapes))


def _capture_in_place(model: torch.nn.Module, sample: torch.Tensor) -> torch.nn.Module:
    """What torch.cuda.make_graphed_callables does to a Module: its forward is replaced in
    place by the graph's replay, and the same module is returned."""
    with torch.no_grad():
        static_out = model(sample)
    params = tuple(model.parameters())
    model.forward = lambda x: _Replay.apply(static_out, *params)  # type: ignore[method-assign]
    return model


def test_flops_of_a_session_whose_forward_cuda_graphs_replaced_in_place() -> None:
    from torchdoctor.collect.profile import count_flops, flop_counting_step
    from torchdoctor.engine import prepare
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads.mlp import MlpWorkload

    workload = MlpWorkload(features=8, hidden=16, layers=1, classes=2, rows=64, batch_size=8)
    session = prepare(workload, Recipe.parse([], workload=workload), device="cpu")
    eager, _, _ = count_flops(flop_counting_step(session))
    assert eager > 0
    sample = session._sample_inputs()
    graphed = _capture_in_place(session.raw_model, sample)
    assert graphed is session.raw_model is session.model
    session.cuda_graphs = True  # what the cuda_graphs knob sets with the capture
    total, _, _ = count_flops(flop_counting_step(session))
    graphed_again = "forward" in session.raw_model.__dict__
    session.close()
    del session, graphed
    gc.collect()  # no optimizer left alive for the tests that look for one
    assert total == eager
    assert graphed_again  # the graphs replay again afterwards
