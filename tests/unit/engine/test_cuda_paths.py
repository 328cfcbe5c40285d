"""CUDA-only engine paths, checked on a CPU machine through fakes (DESIGN.md convention 3).

Real-GPU checks of the same paths carry `requires_cuda` (see test_knob_effects.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import nn

import torchdoctor.knobs.cuda as cuda_knobs
from torchdoctor.core.errors import EngineError, KnobError
from torchdoctor.engine import prepare
from torchdoctor.engine.peak_memory import MemoryTracker
from torchdoctor.engine.session import marks_cudagraph_steps, resolve_device
from torchdoctor.knobs import Recipe
from torchdoctor.knobs.cuda import apply_cuda_flags, read_cuda_flags, restore_cuda_flags
from torchdoctor.workloads import get_workload


def small_mlp() -> Any:
    return get_workload("mlp", features=8, hidden=16, layers=1, rows=256, batch_size=16)


@pytest.mark.parametrize(
    "setting",
    [
        "pin_memory=true",
        "non_blocking=true",
        "cudnn_benchmark=true",
        "tf32=true",
        "cuda_graphs=true",
    ],
)
def test_cuda_only_knob_prepared_on_cpu_is_a_knob_error(setting: str) -> None:
    # The recipe is built without a device (as a tuner or a saved recipe would be), so the
    # engine's own check in prepare() is what must refuse it.
    recipe = Recipe.parse([setting])
    with pytest.raises(KnobError, match=rf"'{setting}' does not apply here.*CUDA"):
        prepare(small_mlp(), recipe, device="cpu")


def test_tf32_off_keeps_torch_default_conv_precision_and_restores_everything() -> None:
    before = read_cuda_flags()
    previous = apply_cuda_flags(cudnn_benchmark=False, tf32=False)
    try:
        assert torch.get_float32_matmul_precision() == "highest"
        assert torch.backends.cudnn.allow_tf32 == before["cudnn_allow_tf32"]
    finally:
        restore_cuda_flags(previous)
    assert read_cuda_flags() == before


def test_tf32_on_leaves_the_legacy_getters_readable() -> None:
    # Inductor reads torch.get_float32_matmul_precision() and matmul.allow_tf32 while it
    # compiles; torch >= 2.9 raises on either once the new fp32_precision API was set
    # (pytorch#166387), so tf32 with compile failed. Both getters must read, set and after
    # a restore, and agree with the new API's view.
    before = torch.get_float32_matmul_precision()
    previous = apply_cuda_flags(cudnn_benchmark=False, tf32=True)
    try:
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cuda.matmul.allow_tf32 is True
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    finally:
        restore_cuda_flags(previous)
    assert torch.get_float32_matmul_precision() == before
    assert isinstance(torch.backends.cuda.matmul.allow_tf32, bool)


class FakeCudaMemory:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def reset_peak_memory_stats(self, device: object) -> None:
        self.calls.append(("reset", device))

    def max_memory_allocated(self, device: object) -> int:
        self.calls.append(("allocated", device))
        return 3 * 2**20

    def max_memory_reserved(self, device: object) -> int:
        self.calls.append(("reserved", device))
        return 4 * 2**20


def test_cuda_peak_memory_is_reset_at_start_and_read_at_end() -> None:
    fake = FakeCudaMemory()
    device = torch.device("cuda", 1)
    tracker = MemoryTracker(device, cuda=fake)
    tracker.start()
    assert fake.calls == [("reset", device)]
    stats = tracker.read()
    assert fake.calls[1:] == [("allocated", device), ("reserved", device)]
    assert stats.cuda_max_allocated_bytes == 3 * 2**20
    assert stats.cuda_max_reserved_bytes == 4 * 2**20


def test_cpu_run_never_queries_cuda_memory() -> None:
    fake = FakeCudaMemory()
    tracker = MemoryTracker(torch.device("cpu"), cuda=fake)
    tracker.start()
    stats = tracker.read()
    assert fake.calls == [] and stats.cuda_max_allocated_bytes is None


def test_graph_capture_runs_under_the_training_autocast_without_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    contexts: list[tuple[str, str, bool]] = []
    captured: list[tuple[Any, tuple[Any, ...], bool]] = []
    inside = {"now": False}

    @contextlib.contextmanager
    def fake_autocast(precision: str, device_type: str, *, cache_enabled: bool) -> Iterator[None]:
        contexts.append((precision, device_type, cache_enabled))
        inside["now"] = True
        yield
        inside["now"] = False

    def fake_make_graphed(model: nn.Module, args: tuple[Any, ...]) -> nn.Module:
        captured.append((model, args, inside["now"]))
        return nn.Identity()

    monkeypatch.setattr(cuda_knobs, "autocast_context", fake_autocast)
    monkeypatch.setattr(torch.cuda, "make_graphed_callables", fake_make_graphed)
    model = nn.Linear(2, 2).eval()
    x = torch.ones(4, 2)
    graphed = cuda_knobs.graph_model(model, x, "fp16")
    assert isinstance(graphed, nn.Identity)
    assert contexts == [("fp16", "cuda", False)]
    assert captured == [(model, (x,), True)]
    assert model.training  # captured in the mode it trains in


def test_graph_capture_rejects_non_tensor_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "make_graphed_callables", lambda *a: pytest.fail("called"))
    with pytest.raises(KnobError, match=r"cuda_graphs=true.*tensors.*dict"):
        cuda_knobs.graph_model(nn.Linear(2, 2), {"x": torch.ones(1, 2)})


@pytest.mark.parametrize(
    ("device", "mode", "marks"),
    [
        ("cuda", "reduce-overhead", True),
        ("cuda", "max-autotune", True),
        ("cuda", "default", False),
        ("cuda", "off", False),
        ("cpu", "reduce-overhead", False),
    ],
)
def test_cudagraph_step_marks_only_for_cuda_graph_compile_modes(
    device: str, mode: str, marks: bool
) -> None:
    assert marks_cudagraph_steps(device, mode) is marks


def test_cuda_device_index_is_checked_against_the_device_count() -> None:
    kwargs: dict[str, Any] = {"cuda_available": lambda: True, "cuda_device_count": lambda: 2}
    assert resolve_device("cuda:1", **kwargs) == torch.device("cuda", 1)
    assert resolve_device("cuda", **kwargs) == torch.device("cuda")
    with pytest.raises(EngineError, match=r"'cuda:2' does not exist.*2 CUDA.*cuda:0 \.\. cuda:1"):
        resolve_device("cuda:2", **kwargs)
    with pytest.raises(EngineError, match="no CUDA device"):
        resolve_device("cuda", cuda_available=lambda: False)


class RecordingScaler:
    """Wraps a real GradScaler and logs the calls the training step makes on it."""

    def __init__(self, scaler: torch.amp.GradScaler, log: list[str]) -> None:
        self.scaler, self.log = scaler, log

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        self.log.append("scale")
        return self.scaler.scale(loss)

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        self.log.append("unscale_")
        self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        self.log.append("step")
        self.scaler.step(optimizer)

    def update(self) -> None:
        self.log.append("update")
        self.scaler.update()


def test_fp16_scaler_scales_each_micro_batch_then_steps_and_updates_once() -> None:
    # torch.amp.GradScaler("cpu") works on the CPU build, so the fp16 path runs for real.
    log: list[str] = []
    with prepare(small_mlp(), Recipe.parse(["precision=fp16", "grad_accum=2"])) as s:
        assert isinstance(s.scaler, torch.amp.GradScaler)
        s.scaler = RecordingScaler(s.scaler, log)  # type: ignore[assignment]
        steps = s.run_steps(2, measure_phases=True)
    assert log == ["scale", "scale", "step", "update"] * 2
    assert all(st.loss is not None for st in steps)


def test_bf16_uses_no_scaler() -> None:
    with prepare(small_mlp(), Recipe.parse(["precision=bf16"])) as s:
        assert s.scaler is None


class FakeCudaDevices:
    """Stands in for `torch.cuda` on a two-GPU machine: a current-device index that
    set_device changes, and graph capture that happens on the current device's streams."""

    def __init__(self, count: int = 2) -> None:
        self.count = count
        self.current = 0
        self.captured_on: list[int] = []
        #: devices with a context: cudaSetDevice creates one (CUDA >= 12)
        self.contexts: set[int] = set()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in (
            "is_available",
            "device_count",
            "current_device",
            "set_device",
            "_maybe_exchange_device",
            "get_device_capability",
            "reset_peak_memory_stats",
            "make_graphed_callables",
        ):
            monkeypatch.setattr(torch.cuda, name, getattr(self, name))

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return self.count

    def current_device(self) -> int:
        return self.current

    def set_device(self, device: int | torch.device) -> None:
        index = device.index if isinstance(device, torch.device) else int(device)
        assert index is not None and 0 <= index < self.count
        self.current = index
        self.contexts.add(index)

    def _maybe_exchange_device(self, index: int) -> int:
        """c10's MaybeExchangeDevice: the current device changes, a context is made only by
        a later use (set now only where one exists)."""
        previous, self.current = self.current, index
        return previous

    def get_device_capability(self, device: int | None = None) -> tuple[int, int]:
        return (9, 0)

    def reset_peak_memory_stats(self, device: object = None) -> None:
        return None

    def make_graphed_callables(self, model: nn.Module, args: tuple[Any, ...]) -> nn.Module:
        # make_graphed_callables captures on a side stream of the *current* device.
        self.captured_on.append(self.current)
        return model


class DeviceRecordingModel(nn.Sequential):
    """A real CPU model whose `.to(cuda:N)` notes which device was current at the move."""

    def __init__(self, fake: FakeCudaDevices, inner: nn.Module) -> None:
        super().__init__(*inner.children())
        self.fake = fake
        self.moved: list[tuple[object, int]] = []

    def to(self, *args: Any, **kwargs: Any) -> DeviceRecordingModel:  # type: ignore[override]
        self.moved.append((args[0] if args else kwargs.get("device"), self.fake.current))
        return self


def test_session_on_cuda_1_makes_it_current_for_model_and_graph_capture(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeCudaDevices()
    fake.install(monkeypatch)
    workload = small_mlp()
    models: list[DeviceRecordingModel] = []
    build = workload.build_model

    def build_model() -> nn.Module:
        models.append(DeviceRecordingModel(fake, build()))
        return models[-1]

    monkeypatch.setattr(workload, "build_model", build_model)
    # Batches stay on the CPU: only the device bookkeeping is under test.
    monkeypatch.setattr(workload, "to_device", lambda batch, device, non_blocking: batch)
    session = prepare(workload, Recipe.parse(["cuda_graphs=true"]), device="cuda:1")
    try:
        assert fake.current == 1
        assert models[0].moved == [(torch.device("cuda", 1), 1)]
        assert fake.captured_on == [1]
    finally:
        session.close()
    assert fake.current == 0  # the caller's current device is back
    assert fake.contexts == {1}  # and no context was opened on GPU 0 to put it back


#: A warm-up workspace far above the small MLP's own footprint (tens of MiB), like cuDNN's
#: benchmark mode or autotuning trying algorithms with large scratch buffers.
WARMUP_WORKSPACE_BYTES = 256 * 2**20


def test_peak_memory_covers_the_steady_state_not_the_warm_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torchdoctor.engine import run_workload

    workload = small_mlp()
    build = workload.build_model
    calls = {"n": 0}

    def build_model() -> nn.Module:
        model = build()

        def workspace(_module: nn.Module, _args: Any) -> None:
            calls["n"] += 1
            if calls["n"] == 1:  # the first (warm-up) forward only
                scratch = torch.ones(WARMUP_WORKSPACE_BYTES // 4)
                del scratch

        model.register_forward_pre_hook(workspace)
        return model

    monkeypatch.setattr(workload, "build_model", build_model)
    result = run_workload(workload, Recipe(), steps=2, warmup_steps=1, measure_phases=False)
    if not result.memory.cpu_peak_is_run_scoped:
        pytest.skip("this OS cannot reset the peak RSS counter")
    assert result.memory.cpu_rss_end_bytes is not None
    assert result.memory.cpu_peak_rss_bytes < result.memory.cpu_rss_end_bytes + (
        WARMUP_WORKSPACE_BYTES // 2
    )
