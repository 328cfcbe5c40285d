"""`Instrumentation`: finds steps and phases in a script we did not write, by hooking torch.

Installed once in a process (by the launcher's bootstrap, a torchrun rank's sitecustomize, or
`watch()`), it composes one probe per hook family (collect/probes):
- optimizer step pre/post hooks (optimizer phase and step boundaries), and
  `Tensor.backward` / `torch.autograd.backward` (backward phase; step boundaries when no
  torch.optim optimizer exists);
- `_BaseDataLoaderIter.__next__` (data wait) and `DataLoader.__iter__` (loader settings);
- `Tensor.to` / `Tensor.cuda` with a device change (host-to-device copies);
- module forward pre/post hooks (forward, outermost call only): global at first, then, once
  the outermost modules repeat step after step, on those modules alone (a global hook puts
  every inner module call on torch's slow path);
- `Tensor.item/.cpu/.tolist/.numpy`, tensor printing and `torch.cuda.synchronize` (host sync
  counters), `zero_grad` (set_to_none) and autocast, and reads the thread settings at the end;
- a sampler thread that attributes the steps' host time to Python lines (`line_sampler.py`),
  unless `CollectConfig.sample_lines` is off;
- with `CollectConfig.memory_owners` (`diagnose` and `memory` ask for it), memory to its
  owners in the last warm-up step (`probes/step_memory.py`: that one step runs every op through a
  dispatch mode).
Each hook is a Python call and a few counter updates; nothing per op runs outside the
profiled window (`window.py`), and no device sync is added on CPU.

This module keeps what is the run's, not one family's: the step recorder and its clock, the
profiled window, the step limit, and the record assembled from the probes' counters.
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from torchdoctor.collect.probes import Probe, ProbeSite
from torchdoctor.collect.probes.backward import BackwardProbe
from torchdoctor.collect.probes.data import CopyProbe, DataLoaderProbe
from torchdoctor.collect.probes.ddp import DDPProbe
from torchdoctor.collect.probes.forward import FORWARD_SETTLE_STEPS, ForwardProbe
from torchdoctor.collect.probes.lines import LineProbe
from torchdoctor.collect.probes.optimizer import OptimizerProbe, optimizer_impl
from torchdoctor.collect.probes.settings import AutocastProbe, ZeroGradProbe
from torchdoctor.collect.probes.step_memory import MemoryProbe
from torchdoctor.collect.probes.syncs import SyncProbe
from torchdoctor.collect.script_profile import (
    EndedBy,
    ScriptProfile,
    SyncKind,
    ThreadInfo,
    ZeroGradEvidence,
)
from torchdoctor.collect.step_recorder import Clock, CudaEventClock, HostClock, StepRecorder
from torchdoctor.collect.window import ProfileWindow
from torchdoctor.core.rank import RankIdentity

__all__ = [
    "FORWARD_SETTLE_STEPS",
    "CollectConfig",
    "Instrumentation",
    "StopCollection",
    "optimizer_impl",
    "thread_info",
]


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
    #: sample the main thread's Python stack inside steps (collect/line_sampler.py)
    sample_lines: bool = True
    #: measure memory to its owners in the last warm-up step (collect/probes/step_memory.py)
    memory_owners: bool = False


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
        recorder = self.recorder
        self.optimizer = OptimizerProbe(recorder)
        self.forward = ForwardProbe(recorder)
        self.backward = BackwardProbe(recorder, on_backward=self.forward.counts.backward_done)
        self.data = DataLoaderProbe(recorder)
        self.syncs = SyncProbe(recorder)
        self.copies = CopyProbe(recorder, self.syncs, on_device=self._saw_device)
        self.zero_grad = ZeroGradProbe()
        self.autocast = AutocastProbe(recorder)
        self.lines = LineProbe(recorder) if self.config.sample_lines else None
        self.ddp = DDPProbe()
        self.memory = (
            MemoryProbe(recorder, warmup=self.config.warmup) if self.config.memory_owners else None
        )
        #: In install order (uninstalling undoes them in reverse). At a step end the forward
        #: probe settles its hooks before the sync probe closes the step's counts.
        self.probes: tuple[Probe, ...] = (
            self.optimizer,
            self.backward,
            self.data,
            self.forward,
            self.copies,
            self.syncs,
            self.zero_grad,
            self.autocast,
            self.ddp,
            *((self.lines,) if self.lines is not None else ()),
            *((self.memory,) if self.memory is not None else ()),
        )
        self._site = ProbeSite()
        self._installed = False
        self._started = 0.0
        self._wall_s = 0.0

    @property
    def sync_counts(self) -> list[dict[SyncKind, int]]:
        """Sync points by kind, one dict per closed step."""
        return self.syncs.counts.per_step

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
        for probe in self.probes:
            probe.install(self._site)
        if self.config.cuda_sync_debug and torch.cuda.is_available():
            torch.cuda.set_sync_debug_mode("warn")
        self.window.on_install()

    def add_probe(self, probe: Probe) -> None:
        """Compose one more probe (the tuner's step controller), told of step ends last."""
        if self._installed:
            raise RuntimeError("add probes before install()")
        self.probes = (*self.probes, probe)

    def uninstall(self) -> None:
        """Stop the window (writing the trace), close the last step, remove every hook."""
        if not self._installed:
            return
        self._installed = False
        with self.syncs.uncounted():
            self.window.stop()
        self.recorder.finish()
        if self.lines is not None:
            self.lines.uninstall()
        if self.memory is not None:
            self.memory.uninstall()
        self.forward.uninstall()
        self._site.remove()
        self._wall_s = time.perf_counter() - self._started

    # ---- step boundaries -------------------------------------------------------------------

    def _on_step_end(self, closed: int) -> None:
        for probe in self.probes:
            probe.on_step_end()
        with self.syncs.uncounted():
            self.window.on_step_end(closed)
        limit = self.config.max_steps
        if limit is not None and closed >= limit and self._installed:
            with self.syncs.uncounted():
                self.window.stop()
            raise StopCollection(f"stopped after {closed} steps (max_steps={limit})")

    def _saw_device(self, device: torch.device) -> None:
        """The script copies to `device`: a clock that times on a GPU times on that one."""
        use_device = getattr(self.clock, "use_device", None)
        if use_device is None:
            return
        if device.index is None:  # "cuda": the current device, whichever that is then
            device = torch.device("cuda", torch.cuda.current_device())
        if device != getattr(self.clock, "device", None):
            use_device(device)

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
        syncs = self.syncs.counts
        where = RankIdentity.from_env()
        memory = self.memory
        # The step memory was counted in runs slower than the others: no line's time.
        unsteady = [*self.window.profiled_steps]
        if memory is not None and memory.step_memory is not None and memory.step_index is not None:
            unsteady.append(memory.step_index)
        return ScriptProfile(
            argv=list(argv or []),
            module=module,
            exit_code=exit_code,
            ended_by=ended_by,
            error=error,
            steps=steps,
            step_detection=self.recorder.detection if steps else "none",
            timing_method="host_clock" if isinstance(self.clock, HostClock) else "cuda_events",
            device=script_device(),
            dataloaders=[s.record() for s in self.data.loaders.values()],
            sync_counts=syncs.per_step[: len(steps)],
            sync_seconds=syncs.seconds[: len(steps)],
            sync_outside_seconds=syncs.outside_seconds[: len(steps)],
            sync_sites=dict(syncs.sites.most_common()),
            h2d=self.copies.counts.record(self.copies.constants),
            forward=self.forward.counts.record(),
            zero_grad=ZeroGradEvidence(
                calls=self.zero_grad.counts.calls,
                set_to_none_false_calls=self.zero_grad.counts.keep,
            ),
            backward_calls=self.backward.counts.calls,
            autocast_dtypes=sorted(self.autocast.dtypes),
            optimizer_impls=sorted(set(self.optimizer.counts.impls.values())),
            optimizer_steps=self.optimizer.counts.steps,
            threads=thread_info(),
            trace_path=str(self.window.written) if self.window.written else None,
            trace_steps=list(self.window.profiled_steps) if self.window.written else [],
            host_lines=self.lines.profile(steps, exclude=unsteady)
            if self.lines is not None
            else None,
            memory=memory.step_memory if memory is not None else None,
            memory_skipped=memory.skipped if memory is not None else None,
            rank=where.rank,
            local_rank=where.local_rank,
            world_size=where.world_size,
            distributed=self.ddp.info() if where.rank is not None else None,
            pid=os.getpid(),
            wall_s=self._wall_s,
            errors=[*self.errors, *self.window.errors],
        )


def script_device() -> str:
    """ "cuda" when the script put tensors on a GPU, else "cpu".

    A GPU in the machine is not a GPU job: a CPU script on it must be judged by the CPU's
    ceilings. CUDA being initialized is no proof either (the step clock's events initialize
    it); an allocation through the caching allocator is, and its cumulative count
    ("allocation.all.allocated", which resetting the peak leaves alone) says whether one
    was ever made. Read only once CUDA is initialized, so reading it creates no context.
    """
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return "cpu"
    for index in range(torch.cuda.device_count()):
        if torch.cuda.memory_stats(index).get("allocation.all.allocated", 0) > 0:
            return "cuda"
    return "cpu"


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
    rank = RankIdentity.from_env().local_rank
    if rank is None or not 0 <= rank < torch.cuda.device_count():
        return None
    return torch.device("cuda", rank)
