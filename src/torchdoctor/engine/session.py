"""A training session: a workload built under a recipe, ready to run steps in chunks.

`prepare()` applies every knob once; `run_steps()` runs steps and times their phases. The
tuner interleaves trials by calling `run_steps` on several sessions in turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

from torchdoctor.core.errors import EngineError
from torchdoctor.core.log import get_logger
from torchdoctor.core.steps import PHASES, Phase, StepTiming
from torchdoctor.core.tool_syncs import tool_sync_range
from torchdoctor.core.vocabulary import Clock
from torchdoctor.engine.loader import EndlessBatches, build_loader
from torchdoctor.engine.peak_memory import MemoryStats, MemoryTracker
from torchdoctor.engine.perturb import perturb_weights
from torchdoctor.engine.step_marks import StepMarks, make_step_marks
from torchdoctor.knobs import (
    BATCH_SIZE,
    CALLED,
    CHANNELS_LAST,
    CHECKPOINTING,
    COMPILE,
    CUDA_GRAPHS,
    GRAD_ACCUM,
    NON_BLOCKING,
    OPTIMIZER_IMPL,
    PRECISION,
    RAW,
    SET_TO_NONE,
    KnobValue,
    ModelContext,
    ProcessSetting,
    Recipe,
    apply_to_model,
    autocast_context,
    catalogue,
    context_for,
    eager_forward,
    inputs_to_channels_last,
    make_grad_scaler,
    workload_under,
)
from torchdoctor.workloads import Batch, Workload, collate_first

log = get_logger(__name__)


class TrainingSession:
    """A model, optimizer and loader configured by a recipe. Build it with `prepare()`."""

    def __init__(
        self,
        workload: Workload,
        recipe: Recipe,
        *,
        device: torch.device,
        seed: int,
        clock: Clock = time.perf_counter,
        step_marks: StepMarks | None = None,
        perturbation: int = 0,
    ) -> None:
        # A recipe's workload parameters (attention=sdpa) rebuild the workload first: the
        # model, its data and loss are the rebuilt workload's.
        workload = workload_under(workload, recipe.resolved(device.type))
        self.workload = workload
        self.recipe = recipe
        self.device = device
        # First, before anything touches the GPU: CUDA graphs capture on the current device's
        # streams and the caching allocator opens its context there.
        self._previous_cuda_device: int | None = None
        if device.type == "cuda":
            self._previous_cuda_device = select_cuda_device(device)
        self.seed = seed
        self.clock = clock
        # Throughput-mode step boundaries: CUDA events on a GPU, the host clock elsewhere.
        self.step_marks = step_marks or make_step_marks(device, clock)
        self.settings: dict[str, KnobValue] = recipe.resolved(device.type)
        s = self.settings
        # The step's own settings (`StepSetting`s), read by the loop below.
        self.batch_size = int(s[BATCH_SIZE.name] or workload.default_batch_size)
        self.grad_accum = int(s[GRAD_ACCUM.name])  # type: ignore[arg-type]
        self.precision = str(s[PRECISION.name])
        self.channels_last = bool(s[CHANNELS_LAST.name])
        self.non_blocking = bool(s[NON_BLOCKING.name])
        self.set_to_none = bool(s[SET_TO_NONE.name])
        self.steps_done = 0
        self.memory = MemoryTracker(device)

        # Process-wide settings (threads, CUDA flags), each undone at close.
        self._undo_process: list[Callable[[], None]] = [
            knob.applies_to.apply(s[knob.name])
            for knob in catalogue()
            if isinstance(knob.applies_to, ProcessSetting)
            and knob.applies_to.applies_on(device.type)
        ]
        self.threads = torch.get_num_threads()

        # The model's initial weights depend on the seed alone.
        torch.manual_seed(seed)
        model = workload.build_model().to(device)
        # A quality reference run (`perturbation` > 0): the same model up to one bf16 rounding.
        perturb_weights(model, perturbation)
        self._model_ctx = ModelContext(
            device_type=device.type,
            settings=s,
            blocks=getattr(workload, "checkpoint_blocks", None),
            sample_inputs=self._sample_inputs,
        )
        try:
            model = apply_to_model(model, self._model_ctx, RAW)
        except BaseException:
            self._restore_process_settings()
            raise
        self.checkpointed_blocks = int(self._model_ctx.notes.get(CHECKPOINTING.name, 0))
        self.raw_model = model
        self.optimizer = workload.build_optimizer(model.parameters(), str(s[OPTIMIZER_IMPL.name]))
        self.scaler = make_grad_scaler(self.precision, device.type)

        self.dataset = workload.build_dataset(seed)
        self.loader: DataLoader[Any] = build_loader(
            self.dataset,
            s,
            batch_size=self.batch_size,
            default_workers=workload.default_num_workers,
            seed=seed,
        )
        self.batches = EndlessBatches(self.loader)

        self.compile_mode = str(s[COMPILE.name])
        self.cuda_graphs = bool(s[CUDA_GRAPHS.name])
        # torch.compile, CUDA graphs: the module the steps call
        self.model: nn.Module = apply_to_model(model, self._model_ctx, CALLED)
        self.mark_cudagraph_steps = marks_cudagraph_steps(device.type, self.compile_mode)
        # Graph replays allocate from private pools: the peak must be read where they show.
        self.memory.graph_pools = self.cuda_graphs or self.mark_cudagraph_steps
        self.model.train()
        self.memory.start()

    # one step

    def _sample_inputs(self) -> Any:
        inputs, _ = self._prepare_batch(collate_first(self.dataset, self.batch_size))
        return inputs

    def _prepare_batch(self, batch: Batch) -> Batch:
        inputs, target = self.workload.to_device(batch, self.device, non_blocking=self.non_blocking)
        if self.channels_last:
            inputs = inputs_to_channels_last(inputs)
        return inputs, target

    def _sync(self) -> None:
        # Host clocks only mean something once queued device work has finished.
        if self.device.type == "cuda":
            with tool_sync_range():  # the tool's wait, not the workload's (analyze.syncs)
                torch.cuda.synchronize(self.device)

    def _forward_loss(self, inputs: Any, target: torch.Tensor) -> torch.Tensor:
        if self.mark_cudagraph_steps:
            # Each forward starts a new cudagraph-trees generation, so outputs of the previous
            # replay may be overwritten safely (torch.compiler.cudagraph_mark_step_begin docs).
            torch.compiler.cudagraph_mark_step_begin()
        # CUDA graphs replay with autocast only when its weight-cast cache is off
        # (make_graphed_callables docs); the capture used the same context.
        with autocast_context(self.precision, self.device.type, cache_enabled=not self.cuda_graphs):
            output = self.model(inputs)
            loss = self.workload.loss(output, target)
        return loss / self.grad_accum if self.grad_accum > 1 else loss

    def _backward(self, loss: torch.Tensor) -> None:
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()

    def _optimizer_step(self) -> None:
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=self.set_to_none)

    def _step_fast(self, *, sync_at_end: bool) -> tuple[Any, torch.Tensor, int]:
        """Throughput mode: no per-step device syncs, no phase clocks.

        Returns (the step's closing mark, loss, samples); `run_steps` turns marks into seconds.
        """
        loss_sum: torch.Tensor | None = None
        samples = 0
        for _ in range(self.grad_accum):
            inputs, target = self._prepare_batch(self.batches.next())
            loss = self._forward_loss(inputs, target)
            self._backward(loss)
            loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
            samples += int(target.shape[0])
        self._optimizer_step()
        if sync_at_end and self.step_marks.needs_final_sync:
            # One sync per chunk so the chunk's total time includes its queued device work
            # (event marks need none: their durations() waits on the last event).
            self._sync()
        assert loss_sum is not None  # grad_accum >= 1
        return self.step_marks.mark(), loss_sum, samples

    def _step_phased(self) -> tuple[float, dict[Phase, float], torch.Tensor, int]:
        """Phase mode: sync the device at each phase boundary, then read the clock."""
        phases: dict[Phase, float] = dict.fromkeys(PHASES, 0.0)
        loss_sum: torch.Tensor | None = None
        samples = 0
        self._sync()
        start = mark = self.clock()

        def lap(phase: Phase) -> None:
            nonlocal mark
            self._sync()
            now = self.clock()
            phases[phase] += now - mark
            mark = now

        for _ in range(self.grad_accum):
            batch = self.batches.next()
            lap("data_wait")
            inputs, target = self._prepare_batch(batch)
            lap("h2d")
            loss = self._forward_loss(inputs, target)
            lap("forward")
            self._backward(loss)
            lap("backward")
            loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
            samples += int(target.shape[0])
        self._optimizer_step()
        lap("optimizer")
        total = mark - start
        assert loss_sum is not None  # grad_accum >= 1
        # `other` is what the named phases leave of the wall time (loss bookkeeping here).
        phases["other"] = max(0.0, total - sum(phases[p] for p in PHASES if p != "other"))
        return total, phases, loss_sum, samples

    # public

    def run_steps(
        self,
        n: int,
        *,
        measure_phases: bool,
        on_step: Callable[[], None] | None = None,
    ) -> list[StepTiming]:
        """Run `n` training steps; returns their timings (phases empty in throughput mode).

        Losses stay on the device until the chunk ends, so recording them costs one sync per
        chunk, not one per step.
        """
        if n < 0:
            raise EngineError(f"cannot run {n} steps", hint="give a step count >= 0")
        rows: list[tuple[float, dict[Phase, float], torch.Tensor, int]] = []
        marks: list[Any] = [] if measure_phases or n == 0 else [self.step_marks.mark()]
        for i in range(n):
            if measure_phases:
                rows.append(self._step_phased())
            else:
                mark, loss, samples = self._step_fast(sync_at_end=i == n - 1)
                marks.append(mark)
                rows.append((0.0, {}, loss, samples))
            if on_step is not None:
                on_step()
        if marks:
            rows = [
                (seconds, phases, loss, samples)
                for seconds, (_, phases, loss, samples) in zip(
                    self.step_marks.durations(marks), rows, strict=True
                )
            ]
        with tool_sync_range():  # reading the losses waits for the device: the tool's read
            losses = torch.stack([r[2] for r in rows]).float().cpu().tolist() if rows else []
        timings = [
            StepTiming(
                index=self.steps_done + i,
                total_s=total,
                phases=phases,
                loss=loss,
                samples=samples,
            )
            for i, ((total, phases, _, samples), loss) in enumerate(zip(rows, losses, strict=True))
        ]
        self.steps_done += n
        return timings

    @property
    def compiled(self) -> bool:
        return self.compile_mode != "off"

    @property
    def replays_graphs(self) -> bool:
        """Whether steps replay CUDA graphs: their kernels bypass the dispatcher, so
        dispatcher-level counters (FlopCounterMode) see almost nothing of them."""
        return self.cuda_graphs or self.mark_cudagraph_steps

    def eager_step(self) -> None:
        """One forward and backward through the model as built, without graphs, compilation
        or an optimizer step (its gradients are cleared): what a FLOP counter can see."""
        inputs, target = self._prepare_batch(self.batches.next())
        # CUDA graphs replaced raw_model's forward in place (make_graphed_callables returns
        # the module it was given): the eager forward runs for this step.
        with eager_forward(self.raw_model), autocast_context(self.precision, self.device.type):
            loss = self.workload.loss(self.raw_model(inputs), target)
        loss.backward()
        self.raw_model.zero_grad(set_to_none=True)

    def reset_peak_memory(self) -> None:
        """Start the peak-memory window again (after warm-up)."""
        self.memory.start()

    def read_memory(self) -> MemoryStats:
        return self.memory.read()

    def close(self) -> None:
        """Stop DataLoader workers and restore process-wide settings this session changed."""
        self.batches.close()
        self._restore_process_settings()

    def _restore_process_settings(self) -> None:
        while self._undo_process:
            self._undo_process.pop()()
        if self._previous_cuda_device is not None:
            restore_cuda_device(self._previous_cuda_device)
            self._previous_cuda_device = None

    def __enter__(self) -> TrainingSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: torch.compile modes that run the compiled graph under CUDA graphs (cudagraph trees) on a
#: CUDA device: "reduce-overhead", and "max-autotune", which turns triton.cudagraphs on too
#: (torch.compile docs, `mode`).
CUDAGRAPH_COMPILE_MODES = frozenset({"reduce-overhead", "max-autotune"})


def marks_cudagraph_steps(device_type: str, compile_mode: str) -> bool:
    """Whether each forward must call torch.compiler.cudagraph_mark_step_begin()."""
    return device_type == "cuda" and compile_mode in CUDAGRAPH_COMPILE_MODES


def select_cuda_device(device: torch.device, cuda: Any = None) -> int:
    """Make `device` the current CUDA device; returns the index that was current before.

    Without it "cuda:1" would still leave cuda:0 current: torch.cuda.make_graphed_callables
    captures on the current device's side stream, `torch.cuda.current_stream()` and new
    events default to it, and a worker process would open a context on GPU 0 as well
    (torch.cuda.set_device docs). "cuda" without an index keeps whichever device is current.
    `cuda` is `torch.cuda` (a fake in tests).
    """
    cuda = torch.cuda if cuda is None else cuda
    previous = int(cuda.current_device())
    if device.index is not None:
        cuda.set_device(device.index)
    return previous


def restore_cuda_device(previous: int, cuda: Any = None) -> None:
    """Make `previous` the current CUDA device again without opening a context on it.

    Since CUDA 12 cudaSetDevice initializes the device's primary context, so setting back a
    device this process never used (GPU 0, current by default, under a session on cuda:1)
    would take hundreds of MB of that GPU for nothing, from a job that may be using it.
    torch's device guards use c10's MaybeExchangeDevice for the same reason: it sets the
    device only where a context exists, and otherwise records it as the one to use next.
    """
    cuda = torch.cuda if cuda is None else cuda
    exchange = getattr(cuda, "_maybe_exchange_device", None)
    if exchange is not None:
        exchange(previous)
    else:  # a torch without it (< 2.1) creates no context in set_device's place either
        cuda.set_device(previous)


def resolve_device(
    device: str,
    *,
    cuda_available: Callable[[], bool] | None = None,
    cuda_device_count: Callable[[], int] | None = None,
) -> torch.device:
    # Looked up per call, not bound at import, so a patched torch.cuda is seen.
    cuda_available = cuda_available or torch.cuda.is_available
    cuda_device_count = cuda_device_count or torch.cuda.device_count
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise EngineError(f"unknown device '{device}'", hint="use cpu or cuda[:N]") from exc
    if dev.type == "cuda" and not cuda_available():
        raise EngineError(f"device '{device}' is not available: no CUDA device on this machine")
    if dev.type == "cuda" and dev.index is not None and dev.index >= cuda_device_count():
        raise EngineError(
            f"device '{device}' does not exist: this machine has {cuda_device_count()} CUDA "
            "device(s)",
            hint=f"use cuda:0 .. cuda:{cuda_device_count() - 1}",
        )
    if dev.type not in ("cpu", "cuda"):
        raise EngineError(f"device '{device}' is not supported", hint="use cpu or cuda[:N]")
    return dev


def prepare(
    workload: Workload,
    recipe: Recipe,
    *,
    device: str = "cpu",
    seed: int = 0,
    clock: Clock = time.perf_counter,
    perturbation: int = 0,
) -> TrainingSession:
    """Build a training session of `workload` configured by `recipe` on `device`.

    `perturbation` > 0 builds a quality reference run (`torchdoctor.engine.perturb`).
    Raises KnobError when a knob does not apply to this workload or device.
    """
    dev = resolve_device(device)
    ctx = context_for(workload, str(dev))  # with its index: capability is per GPU
    assert ctx is not None
    recipe.check_applicable(ctx)
    return TrainingSession(
        workload, recipe, device=dev, seed=seed, clock=clock, perturbation=perturbation
    )
