"""`Instrumentation`: finds steps and phases in a script we did not write, by hooking torch.

Installed once in a process (by the launcher's bootstrap, a torchrun rank's sitecustomize, or
`watch()`), it hooks:
- global optimizer step pre/post hooks (optimizer phase and step boundaries), and
  `Tensor.backward` / `torch.autograd.backward` (backward phase; step boundaries when no
  torch.optim optimizer exists);
- `_BaseDataLoaderIter.__next__` (data wait) and `DataLoader.__iter__` (loader settings);
- `Tensor.to` / `Tensor.cuda` with a device change (host-to-device copies);
- module forward pre/post hooks (forward, outermost call only): global at first, then, once
  the outermost modules repeat step after step, on those modules alone (a global hook puts
  every inner module call on torch's slow path);
- `Tensor.item/.cpu/.tolist/.numpy`, tensor printing and `torch.cuda.synchronize` (host sync
  counters), `zero_grad` (set_to_none), and reads the thread settings at the end.
Each hook is a Python call and a few counter updates; nothing per op runs outside the
profiled window (`window.py`), and no device sync is added on CPU.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.optim.optimizer as optim_mod
import torch.utils.data.dataloader as dl_mod
from torch.nn.modules import module as module_mod

from torchdoctor.collect._patching import (
    Patcher,
    batch_size_of,
    non_blocking_flag,
    target_device,
    user_site,
)
from torchdoctor.collect.script_profile import (
    DataLoaderInfo,
    EndedBy,
    ForwardEvidence,
    H2DInfo,
    ScriptProfile,
    SyncKind,
    ThreadInfo,
    ZeroGradEvidence,
)
from torchdoctor.collect.steps import Clock, CudaEventClock, HostClock, StepRecorder
from torchdoctor.collect.window import ProfileWindow

#: Consecutive steps whose outermost modules must be the same before the global forward
#: hooks give way to hooks on those modules: a training loop calls its model every step, so
#: three identical steps in a row identify it (a warm-up step that also runs, say, a summary
#: forward of another module just delays the switch).
FORWARD_SETTLE_STEPS = 3
#: What a global forward hook pair adds to one module call: 4.0-4.8 µs measured on the dev
#: machine (benchmarks/RESULTS.md, bench_instrumentation_overhead: 1.2-1.5 µs plain vs
#: 5.3-6.3 µs instrumented per call); 5 µs rounds it up.
HOOK_CALL_COST_S = 5e-6
#: Share of step time the global hooks must cost on inner module calls before they give way
#: to hooks on the outermost modules: 1%, a third of the 3% overhead budget (issue 5) and
#: under the smallest effect the rules report (findings.LOW_SHARE). Below it the global
#: hooks stay, and so does forward coverage of models first called later (evaluation).
MIN_HOOK_SAVING_SHARE = 0.01

#: Distinct sync call sites kept; a script syncing from more places than this is already
#: clearly sync-heavy, and the record stays small.
MAX_SYNC_SITES = 50
#: GradScaler's module (torch.amp.grad_scaler; torch.cuda.amp's is a thin subclass of it).
GRAD_SCALER_FILE = os.path.join("amp", "grad_scaler.py")
#: Frames walked up from a sync call to find who made it (wrapper, genexpr, caller).
_CALLER_FRAMES = 6


def _called_from(suffix: str, *, depth: int) -> bool:
    """Whether one of the few frames above `depth` runs code from a file ending in `suffix`."""
    import sys
    import types

    frame: types.FrameType | None = sys._getframe(depth)
    for _ in range(_CALLER_FRAMES):
        if frame is None:
            return False
        if frame.f_code.co_filename.endswith(suffix):
            return True
        frame = frame.f_back
    return False


class StopCollection(BaseException):
    """Raised at a step boundary once `max_steps` steps are recorded; the launcher catches it.

    A BaseException so that a script's `except Exception` does not swallow it.
    """


@dataclass(frozen=True)
class CollectConfig:
    """What to collect: the profiled window, an optional step limit, CUDA options."""

    warmup: int = 5
    profile_steps: int = 5
    max_steps: int | None = None
    trace_path: Path | None = None
    cuda_events: bool = True
    cuda_sync_debug: bool = False


@dataclass
class _LoaderStats:
    info: dict[str, Any]
    batches: int = 0
    wait_s: float = 0.0


class Instrumentation:
    """Hooks torch to record per-step phase times and evidence; see the module docstring.

    Use `install()` / `uninstall()` (or as a context manager), then `result(...)`.
    """

    def __init__(self, config: CollectConfig | None = None, *, clock: Clock | None = None) -> None:
        self.config = config or CollectConfig()
        use_events = clock is None and self.config.cuda_events and torch.cuda.is_available()
        self.clock: Clock = clock or (
            CudaEventClock(_launcher_device()) if use_events else HostClock()
        )
        self.recorder = StepRecorder(self.clock, on_step_end=self._on_step_end)
        self.window = ProfileWindow(
            warmup=self.config.warmup,
            steps=self.config.profile_steps,
            trace_path=self.config.trace_path,
        )
        self.errors: list[str] = []
        self.sync_counts: list[dict[SyncKind, int]] = []
        #: per step: seconds spent inside counted sync calls, and the part of it outside
        #: every named phase (which the step recorder files under `other`)
        self.sync_seconds: list[float] = []
        self.sync_outside_seconds: list[float] = []
        self._sync_s = 0.0
        self._sync_outside_s = 0.0
        self.sync_sites: Counter[str] = Counter()
        self._sync_step: Counter[SyncKind] = Counter()
        self._in_sync = False
        self._loaders: dict[int, _LoaderStats] = {}
        self._h2d = {"calls": 0, "non_blocking": 0, "pinned": 0, "bytes": 0, "seconds": 0.0}
        self._fwd = {"calls": 0, "grad": 0, "eval_grad": 0, "pending": 0, "consumed": 0}
        self._zero_grad = {"calls": 0, "keep": 0}
        self.autocast_dtypes: set[str] = set()
        self.optimizer_impls: dict[int, str] = {}
        # forward hooks: global until the outermost modules are known (_settle_forward_hooks)
        self._global_forward: list[Any] = []
        self._forward_hooks: tuple[Callable[..., Any], Callable[..., Any]] | None = None
        self._outer_step: dict[int, torch.nn.Module] = {}
        self._outer_prev: frozenset[int] = frozenset()
        self._outer_streak = 0
        self._module_calls = 0
        self.backward_calls = 0
        self.optimizer_steps = 0
        self._patcher = Patcher()
        self._handles: list[Any] = []
        self._installed = False
        self._started = 0.0

    # ---- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> Instrumentation:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def install(self) -> None:
        if self._installed:
            return
        self._installed = True
        self._started = time.perf_counter()
        # An optimizer built before install (watch() in a notebook) also disables backward
        # boundaries. issubclass(type(o)) rather than isinstance: isinstance reads __class__,
        # which lazy module proxies answer with deprecation warnings.
        self.recorder.optimizer_exists = any(
            issubclass(type(o), torch.optim.Optimizer) for o in gc.get_objects()
        )
        self._hook_optimizer()
        self._hook_backward()
        self._hook_dataloader()
        self._hook_forward()
        self._hook_copies_and_syncs()
        self._hook_zero_grad()
        self._hook_autocast()
        if self.config.cuda_sync_debug and torch.cuda.is_available():
            torch.cuda.set_sync_debug_mode("warn")
        self.window.on_install()

    def uninstall(self) -> None:
        """Stop the window (writing the trace), close the last step, remove every hook."""
        if not self._installed:
            return
        self._installed = False
        with self._uncounted_syncs():
            self.window.stop()
        self.recorder.finish()
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._outer_step.clear()
        self._patcher.restore()
        self._wall_s = time.perf_counter() - self._started

    # ---- step boundaries -------------------------------------------------------------------

    def _on_step_end(self, closed: int) -> None:
        self._settle_forward_hooks()
        self.sync_counts.append(dict(self._sync_step))
        self.sync_seconds.append(self._sync_s)
        self.sync_outside_seconds.append(self._sync_outside_s)
        self._sync_step = Counter()
        self._sync_s = self._sync_outside_s = 0.0
        with self._uncounted_syncs():
            self.window.on_step_end(closed)
        limit = self.config.max_steps
        if limit is not None and closed >= limit and self._installed:
            with self._uncounted_syncs():
                self.window.stop()
            raise StopCollection(f"stopped after {closed} steps (max_steps={limit})")

    def _hook_optimizer(self) -> None:
        recorder = self.recorder

        impls = self.optimizer_impls

        def pre(opt: Any, _args: Any, _kwargs: Any) -> None:
            recorder.begin("optimizer")
            if id(opt) not in impls:
                impls[id(opt)] = optimizer_impl(opt)

        def post(_opt: Any, _args: Any, _kwargs: Any) -> None:
            recorder.end("optimizer")
            self.optimizer_steps += 1
            recorder.optimizer_step_end()

        self._handles.append(optim_mod.register_optimizer_step_pre_hook(pre))
        self._handles.append(optim_mod.register_optimizer_step_post_hook(post))
        original_init = optim_mod.Optimizer.__init__

        def init(opt: Any, *args: Any, **kwargs: Any) -> None:
            recorder.optimizer_exists = True
            original_init(opt, *args, **kwargs)

        self._patcher.set(optim_mod.Optimizer, "__init__", init)

    def _hook_backward(self) -> None:
        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            def backward(*args: Any, **kwargs: Any) -> Any:
                outermost = self.recorder.active_phase is None
                self.recorder.begin("backward")
                try:
                    return original(*args, **kwargs)
                finally:
                    self.recorder.end("backward")
                    if outermost:
                        self.backward_calls += 1
                        self._fwd["consumed"] += self._fwd["pending"]
                        self._fwd["pending"] = 0

            return backward

        self._patcher.set(torch.Tensor, "backward", wrap(torch.Tensor.backward))
        self._patcher.set(torch.autograd, "backward", wrap(torch.autograd.backward))

    # ---- data, forward, copies -------------------------------------------------------------

    def _hook_dataloader(self) -> None:
        loaders = self._loaders
        original_iter = dl_mod.DataLoader.__iter__
        original_next = dl_mod._BaseDataLoaderIter.__next__

        def dl_iter(loader: Any) -> Any:
            it = original_iter(loader)
            key = id(loader)
            if key not in loaders:
                loaders[key] = _LoaderStats(_loader_info(loader))
            # a custom iterator with __slots__ cannot be tagged: no per-loader stats for it
            with contextlib.suppress(AttributeError):
                setattr(it, "_torchdoctor_loader", key)  # noqa: B010 - not a declared attribute
            return it

        def dl_next(it: Any) -> Any:
            stats = loaders.get(getattr(it, "_torchdoctor_loader", -1))
            self.recorder.begin("data_wait")
            start = time.perf_counter()
            try:
                batch = original_next(it)
            finally:
                self.recorder.end("data_wait")
                if stats is not None:
                    stats.wait_s += time.perf_counter() - start
            if stats is not None:
                stats.batches += 1
            self.recorder.note_samples(batch_size_of(batch))
            return batch

        self._patcher.set(dl_mod.DataLoader, "__iter__", dl_iter)
        self._patcher.set(dl_mod._BaseDataLoaderIter, "__next__", dl_next)

    def _hook_forward(self) -> None:
        """Global module forward hooks first; once the same outermost modules have run in
        `FORWARD_SETTLE_STEPS` consecutive steps, hooks on those modules alone (see
        `_settle_forward_hooks`)."""
        recorder, fwd = self.recorder, self._fwd

        def pre(module: torch.nn.Module, _args: Any) -> None:
            outermost = recorder.active_phase is None
            self._module_calls += 1
            if outermost:
                fwd["calls"] += 1
                if torch.is_grad_enabled():
                    fwd["grad"] += 1
                    fwd["pending"] += 1
                    if not module.training:
                        fwd["eval_grad"] += 1
            # begin() may close the previous step (backward mode): this call is the next's.
            recorder.begin("forward")
            if outermost and self._global_forward:
                self._outer_step[id(module)] = module

        def post(_module: torch.nn.Module, _args: Any, _out: Any) -> None:
            recorder.end("forward")

        self._forward_hooks = (pre, post)
        self._global_forward = [
            module_mod.register_module_forward_pre_hook(pre),
            module_mod.register_module_forward_hook(post, always_call=True),
        ]
        self._handles.extend(self._global_forward)

    def _settle_forward_hooks(self) -> None:
        """At a step end: replace the global forward hooks by hooks on the outermost modules
        once those have been the same for FORWARD_SETTLE_STEPS steps, if the global hooks'
        cost on inner module calls is at least MIN_HOOK_SAVING_SHARE of the step.

        A global module hook sends every module call (every conv, norm, activation) through
        torch's slow call path plus two Python calls, ~4-5 µs each (benchmarks/RESULTS.md,
        bench_instrumentation_overhead): small for a CNN, but a tenth of the step of a model
        of many tiny modules, whose framework overhead it would then inflate. Hooks on the
        outermost modules cost that once per forward. The price: a model first called after
        the switch (a separate evaluation model) is no longer seen as forward, which is why
        cheap global hooks stay.
        """
        if not self._global_forward:
            return
        ids = frozenset(self._outer_step)
        self._outer_streak = self._outer_streak + 1 if ids and ids == self._outer_prev else 1
        self._outer_prev = ids
        modules, self._outer_step = self._outer_step, {}
        inner_calls, self._module_calls = max(0, self._module_calls - len(ids)), 0
        last = self.recorder.steps[-1].total_s if self.recorder.steps else 0.0
        saving = inner_calls * HOOK_CALL_COST_S / last if last > 0 else 0.0
        if not ids or self._outer_streak < FORWARD_SETTLE_STEPS:
            return
        if saving < MIN_HOOK_SAVING_SHARE:
            return
        assert self._forward_hooks is not None  # set with the global hooks
        pre, post = self._forward_hooks
        for handle in self._global_forward:
            handle.remove()
        self._global_forward = []
        for module in modules.values():
            self._handles.append(module.register_forward_pre_hook(pre))
            self._handles.append(module.register_forward_hook(post, always_call=True))

    def _hook_copies_and_syncs(self) -> None:
        original_to, original_cuda = torch.Tensor.to, torch.Tensor.cuda

        def copy(original: Callable[..., Any], device: torch.device | None) -> Callable[..., Any]:
            def wrapper(t: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
                dst = device or target_device(args, kwargs)
                if dst is None or dst.type == t.device.type:
                    return original(t, *args, **kwargs)
                if dst.type == "cuda":
                    # The script's data and model go there: time its steps on that device.
                    self._saw_device(dst)
                if dst.type == "cpu":  # device -> host: waits for the device
                    return self._timed_sync(original, "cpu", t, *args, **kwargs)
                return self._timed_h2d(original, t, args, kwargs)

            return wrapper

        self._patcher.set(torch.Tensor, "to", copy(original_to, None))
        self._patcher.set(torch.Tensor, "cuda", copy(original_cuda, torch.device("cuda")))
        counted: tuple[tuple[str, SyncKind], ...] = (
            ("item", "item"),
            ("cpu", "cpu"),
            ("tolist", "tolist"),
            ("numpy", "numpy"),
            ("__repr__", "print"),
            ("__format__", "print"),
        )
        for name, kind in counted:
            self._patcher.set(torch.Tensor, name, self._counting(getattr(torch.Tensor, name), kind))
        self._patcher.set(
            torch.cuda, "synchronize", self._counting(torch.cuda.synchronize, "cuda_synchronize")
        )

    def _saw_device(self, device: torch.device) -> None:
        use_device = getattr(self.clock, "use_device", None)
        if use_device is None:
            return
        if device.index is None:  # "cuda": the current device, whichever that is then
            device = torch.device("cuda", torch.cuda.current_device())
        if device != getattr(self.clock, "device", None):
            use_device(device)

    def _timed_h2d(
        self, original: Callable[..., Any], t: torch.Tensor, args: Any, kwargs: Any
    ) -> Any:
        h2d = self._h2d
        h2d["calls"] += 1
        h2d["bytes"] += t.numel() * t.element_size()
        if non_blocking_flag(args, kwargs):
            h2d["non_blocking"] += 1
        if t.is_pinned():
            h2d["pinned"] += 1
        self.recorder.begin("h2d")
        start = time.perf_counter()
        try:
            return original(t, *args, **kwargs)
        finally:
            self.recorder.end("h2d")
            h2d["seconds"] += time.perf_counter() - start

    @contextlib.contextmanager
    def _uncounted_syncs(self) -> Iterator[None]:
        """Syncs made by torchdoctor itself in here are not the script's: the profiler's
        stop calls torch.cuda.synchronize (the patched one) to flush the device's activity."""
        was, self._in_sync = self._in_sync, True
        try:
            yield
        finally:
            self._in_sync = was

    def _counting(self, original: Callable[..., Any], kind: SyncKind) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._in_sync:  # printing calls .item() / .tolist() inside: count once
                return original(*args, **kwargs)
            return self._timed_sync(original, kind, *args, **kwargs)

        return wrapper

    def _timed_sync(
        self, original: Callable[..., Any], kind: SyncKind, *args: Any, **kwargs: Any
    ) -> Any:
        """Count a sync point and time the call: the time blocked in it is what it costs the
        host (on a GPU, the wait for the device queue to drain; on CPU, the conversion or
        formatting the call does)."""
        if not self._count_sync(kind):
            return original(*args, **kwargs)
        outside = self.recorder.active_phase is None
        self._in_sync = True
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - start
            self._in_sync = False
            self._sync_s += elapsed
            if outside:
                self._sync_outside_s += elapsed

    def _count_sync(self, kind: SyncKind) -> bool:
        """Count a sync point made by the script; False for one that does not count."""
        # torch.optim reads its step counters with .item() and collate builds batches: those
        # are the library's own, not the script's sync points.
        if not self.recorder.in_step or self.recorder.active_phase in ("optimizer", "data_wait"):
            return False
        # GradScaler.step reads its found_inf flags with .item() before optimizer.step (in
        # torch.amp.grad_scaler's _maybe_opt_step): the AMP recipe's own sync, not the script's.
        if _called_from(GRAD_SCALER_FILE, depth=3):
            return False
        self._sync_step[kind] += 1
        site = user_site(3)
        if site is not None and (site in self.sync_sites or len(self.sync_sites) < MAX_SYNC_SITES):
            self.sync_sites[site] += 1
        return True

    def _hook_zero_grad(self) -> None:
        counts = self._zero_grad

        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            def zero_grad(obj: Any, *args: Any, **kwargs: Any) -> Any:
                counts["calls"] += 1
                set_to_none = kwargs.get("set_to_none", args[0] if args else True)
                if not set_to_none:
                    counts["keep"] += 1
                return original(obj, *args, **kwargs)

            return zero_grad

        self._patcher.set(optim_mod.Optimizer, "zero_grad", wrap(optim_mod.Optimizer.zero_grad))
        self._patcher.set(torch.nn.Module, "zero_grad", wrap(torch.nn.Module.zero_grad))

    def _hook_autocast(self) -> None:
        """Record the dtypes of autocast regions entered inside a step: the precision the
        model computes in, which the roofline and the precision rule need."""
        autocast_cls = torch.amp.autocast_mode.autocast
        original = autocast_cls.__enter__
        dtypes, recorder = self.autocast_dtypes, self.recorder

        def enter(ctx: Any) -> Any:
            if recorder.in_step and getattr(ctx, "_enabled", False):
                dtypes.add(str(getattr(ctx, "fast_dtype", "")).removeprefix("torch."))
            return original(ctx)

        self._patcher.set(autocast_cls, "__enter__", enter)

    # ---- result ----------------------------------------------------------------------------

    def result(
        self,
        *,
        argv: list[str] | None = None,
        module: bool = False,
        exit_code: int | None = None,
        ended_by: EndedBy = "completed",
        error: str | None = None,
    ) -> ScriptProfile:
        """The record of what was measured (uninstalls first if still installed)."""
        self.uninstall()
        steps = self.recorder.steps
        fwd, h2d = self._fwd, self._h2d
        return ScriptProfile(
            argv=list(argv or []),
            module=module,
            exit_code=exit_code,
            ended_by=ended_by,
            error=error,
            steps=steps,
            step_detection=self.recorder.detection if steps else "none",
            timing_method="host_clock" if isinstance(self.clock, HostClock) else "cuda_events",
            device="cuda" if torch.cuda.is_available() else "cpu",
            dataloaders=[_loader_record(s) for s in self._loaders.values()],
            sync_counts=self.sync_counts[: len(steps)],
            sync_seconds=self.sync_seconds[: len(steps)],
            sync_outside_seconds=self.sync_outside_seconds[: len(steps)],
            sync_sites=dict(self.sync_sites.most_common()),
            h2d=H2DInfo(
                calls=int(h2d["calls"]),
                non_blocking_calls=int(h2d["non_blocking"]),
                pinned_calls=int(h2d["pinned"]),
                bytes=int(h2d["bytes"]),
                seconds=float(h2d["seconds"]),
            ),
            forward=ForwardEvidence(
                calls=fwd["calls"],
                grad_enabled_calls=fwd["grad"],
                eval_mode_grad_calls=fwd["eval_grad"],
                grad_forwards_without_backward=fwd["grad"] - fwd["consumed"],
            ),
            zero_grad=ZeroGradEvidence(
                calls=self._zero_grad["calls"], set_to_none_false_calls=self._zero_grad["keep"]
            ),
            backward_calls=self.backward_calls,
            autocast_dtypes=sorted(self.autocast_dtypes),
            optimizer_impls=sorted(set(self.optimizer_impls.values())),
            optimizer_steps=self.optimizer_steps,
            threads=thread_info(),
            trace_path=str(self.window.written) if self.window.written else None,
            trace_steps=list(self.window.profiled_steps) if self.window.written else [],
            rank=_env_int("RANK"),
            local_rank=_env_int("LOCAL_RANK"),
            world_size=_env_int("WORLD_SIZE"),
            pid=os.getpid(),
            wall_s=getattr(self, "_wall_s", 0.0),
            errors=[*self.errors, *self.window.errors],
        )


def optimizer_impl(opt: Any) -> str:
    """ "fused", "foreach" or "for_loop": the implementation torch.optim will run.

    `foreach=None` (the default) means torch chooses: foreach when every parameter is on a
    CUDA device, the per-tensor loop otherwise (torch.optim.optimizer._default_to_fused_or_
    foreach).
    """
    defaults = getattr(opt, "defaults", {}) or {}
    if defaults.get("fused"):
        return "fused"
    foreach = defaults.get("foreach")
    if foreach is None:
        params = [p for g in getattr(opt, "param_groups", []) for p in g.get("params", [])]
        foreach = bool(params) and all(getattr(p, "is_cuda", False) for p in params)
    return "foreach" if foreach else "for_loop"


def _loader_info(loader: Any) -> dict[str, Any]:
    try:
        dataset_len: int | None = len(loader.dataset)
    except TypeError:  # an IterableDataset without __len__
        dataset_len = None
    context = loader.multiprocessing_context
    return {
        "num_workers": int(loader.num_workers),
        "pin_memory": bool(loader.pin_memory),
        "batch_size": loader.batch_size,
        "persistent_workers": bool(loader.persistent_workers),
        "prefetch_factor": loader.prefetch_factor,
        "multiprocessing_context": context.get_start_method() if context is not None else None,
        "dataset_len": dataset_len,
    }


def _loader_record(stats: _LoaderStats) -> DataLoaderInfo:
    return DataLoaderInfo(**stats.info, batches_fetched=stats.batches, wait_s=stats.wait_s)


def thread_info() -> ThreadInfo:
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        usable = None
    return ThreadInfo(
        torch_num_threads=torch.get_num_threads(),
        torch_num_interop_threads=torch.get_num_interop_threads(),
        omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
        mkl_num_threads=os.environ.get("MKL_NUM_THREADS"),
        cpu_count=os.cpu_count(),
        usable_cores=usable,
    )


def _launcher_device() -> torch.device | None:
    """The first guess at a script's GPU: cuda:LOCAL_RANK under torchrun, else None.

    DDP scripts conventionally use the GPU of their local rank; the first host-to-device
    copy confirms or corrects it (`Instrumentation._saw_device`).
    """
    rank = _env_int("LOCAL_RANK")
    if rank is None or not 0 <= rank < torch.cuda.device_count():
        return None
    return torch.device("cuda", rank)


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
