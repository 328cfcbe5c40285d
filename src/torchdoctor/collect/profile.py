"""Capture a profile of a workload: a Kineto trace of a window of steps, FLOPs and memory.

`profile_workload` builds a training session with the engine and runs
`wait + warmup + active` steps under `torch.profiler.profile` with a schedule, calling
`prof.step()` after each step (the engine's `on_step` hook):

- wait steps run unprofiled: the first steps pay one-off costs (allocator growth, lazy
  init, compilation) that would distort the window;
- warmup steps are traced but discarded: the profiler's own start-up cost lands there;
- active steps are recorded, each marked `ProfilerStep#N` in the trace.

FLOPs come from `torch.utils.flop_counter.FlopCounterMode` on one extra step after the
window, outside the traced steps (the counter's dispatch overhead must not appear in the
trace): per op overall and per module (the counter tracks the module hierarchy, names like
`Sequential.0`). Memory: the profiler records allocations (`profile_memory=True`, visible in
the trace) and the engine reports peak host RSS / CUDA allocator peaks.
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from pydantic import Field

from torchdoctor.collect.quiet import quiet_profiling, quietly
from torchdoctor.core.errors import CollectError
from torchdoctor.core.io import atomic_path
from torchdoctor.core.records import Record, SubRecord
from torchdoctor.core.rundir import TRACE

if TYPE_CHECKING:
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads import Workload

#: The capture summary in the run folder (beside trace.json.gz and analysis.json).
PROFILE_SUMMARY = "profile_summary.json"
#: How many ops to keep in the memory table (the heaviest allocators).
MEMORY_TOP_OPS = 15


class ModuleFlops(SubRecord):
    """FLOPs of one module (its whole subtree) in one training step, by op."""

    module: str
    flops: int
    by_op: dict[str, int]


class OpMemory(SubRecord):
    """Memory an op allocated itself during the window (profile_memory), summed over calls."""

    name: str
    calls: int
    self_cpu_memory_bytes: int
    self_device_memory_bytes: int


class ProfileCapture(Record):
    """What `torchdoctor profile` captured: the window, the step FLOPs, memory."""

    schema_name: ClassVar[str] = "profile_capture"

    workload: str
    recipe: dict[str, str | int | float | bool | None]
    device: str
    seed: int
    wait: int
    warmup: int
    active: int
    activities: list[str]
    trace_file: str = Field(description="the Kineto trace, relative to the run folder")
    step_times_s: list[float] = Field(description="wall time of each active step")
    flops_per_step: int = Field(description="FLOPs of one training step (FlopCounterMode)")
    flops_by_op: dict[str, int]
    flops_by_module: list[ModuleFlops]
    memory_by_op: list[OpMemory]
    peak_host_rss_bytes: int | None = None
    peak_device_allocated_bytes: int | None = None


def _check_window(wait: int, warmup: int, active: int) -> None:
    if wait < 0 or warmup < 0 or active < 1:
        raise CollectError(
            f"bad profiling window wait={wait} warmup={warmup} active={active}",
            hint="use --wait >= 0, --warmup >= 0 and --active >= 1",
        )


def _activities(device: torch.device) -> list[torch.profiler.ProfilerActivity]:
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda" and torch.cuda.is_available():
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    return acts


def _export(prof: torch.profiler.profile, dest: Path) -> None:
    """Write the trace gzipped, atomically: export JSON to a temp file, gzip it into place."""
    with tempfile.TemporaryDirectory(dir=dest.parent) as scratch, atomic_path(dest) as tmp:
        raw = Path(scratch) / "trace.json"
        prof.export_chrome_trace(str(raw))
        with raw.open("rb") as src, gzip.open(tmp, "wb", compresslevel=6) as out:
            shutil.copyfileobj(src, out, 1 << 20)


def _memory_by_op(prof: torch.profiler.profile) -> list[OpMemory]:
    rows = [
        OpMemory(
            name=e.key,
            calls=int(e.count),
            self_cpu_memory_bytes=int(e.self_cpu_memory_usage),
            self_device_memory_bytes=int(getattr(e, "self_device_memory_usage", 0) or 0),
        )
        for e in prof.key_averages()
    ]
    rows = [r for r in rows if r.self_cpu_memory_bytes or r.self_device_memory_bytes]
    rows.sort(key=lambda r: abs(r.self_cpu_memory_bytes) + abs(r.self_device_memory_bytes))
    return rows[::-1][:MEMORY_TOP_OPS]


def count_flops(run_step: Callable[[], Any]) -> tuple[int, dict[str, int], list[ModuleFlops]]:
    """FLOPs of one call of `run_step()`: total, per op, per module (FlopCounterMode)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        run_step()
    counts = counter.get_flop_counts()
    by_op = {str(op): int(n) for op, n in counts.get("Global", {}).items()}
    modules = [
        ModuleFlops(
            module=name,
            flops=sum(int(n) for n in ops.values()),
            by_op={str(op): int(n) for op, n in ops.items()},
        )
        for name, ops in counts.items()
        if name != "Global"
    ]
    return int(counter.get_total_flops()), by_op, modules


def flop_counting_step(session: Any) -> Callable[[], Any]:
    """The step FLOPs are counted on: a training step, or an eager one under CUDA graphs.

    A graph replay launches its recorded kernels without going through the dispatcher, so
    FlopCounterMode would count about zero FLOPs for it; the eager forward and backward of
    the same model run the same matmuls and convolutions (the optimizer's elementwise
    update, which the counter does not count either, is left out).
    """
    if getattr(session, "replays_graphs", False):
        return session.eager_step
    return lambda: session.run_steps(1, measure_phases=False)


def profile_workload(
    workload: Workload,
    recipe: Recipe,
    run_dir: Path,
    *,
    device: str = "cpu",
    seed: int = 0,
    wait: int = 1,
    warmup: int = 2,
    active: int = 3,
) -> ProfileCapture:
    """Profile `active` steps of `workload` under `recipe`; write run_dir/trace.json.gz."""
    from torchdoctor.engine import prepare

    _check_window(wait, warmup, active)
    session = prepare(workload, recipe, device=device, seed=seed)
    acts = _activities(session.device)
    with session:
        schedule = torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1)
        prof = torch.profiler.profile(
            activities=acts,
            schedule=schedule,
            record_shapes=True,
            profile_memory=True,
            on_trace_ready=lambda p: _export(p, run_dir / TRACE),
        )
        # The schedule starts and stops the tracer inside start/step/stop calls: each runs
        # with Kineto's log lines filtered out (see torchdoctor.collect.quiet).
        with quiet_profiling(prof):
            timings = session.run_steps(
                wait + warmup + active, measure_phases=False, on_step=lambda: quietly(prof.step)
            )
        memory_rows = _memory_by_op(prof)
        total, by_op, modules = count_flops(flop_counting_step(session))
        memory = session.read_memory()
    if not (run_dir / TRACE).is_file():
        raise CollectError(f"the profiler wrote no trace to {run_dir / TRACE}")
    return ProfileCapture(
        workload=str(getattr(workload, "name", workload)),
        recipe=dict(recipe.to_dict()),
        device=str(session.device),
        seed=seed,
        wait=wait,
        warmup=warmup,
        active=active,
        activities=[a.name for a in acts],
        trace_file=TRACE,
        step_times_s=[t.total_s for t in timings[wait + warmup :]],
        flops_per_step=total,
        flops_by_op=by_op,
        flops_by_module=sorted(modules, key=lambda m: (-m.flops, m.module)),
        memory_by_op=memory_rows,
        peak_host_rss_bytes=memory.cpu_peak_rss_bytes,
        peak_device_allocated_bytes=memory.cuda_max_allocated_bytes,
    )
