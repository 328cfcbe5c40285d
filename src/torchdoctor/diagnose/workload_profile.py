"""Run a workload for diagnosis: phase-timed steady steps, then a short profiled window.

The two are separate sessions on purpose: the profiler slows the steps it watches, so phase
fractions come from unprofiled steps and the op table from the profiled ones.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from torchdoctor.core.errors import DiagnoseError

if TYPE_CHECKING:
    from torchdoctor.core.hostlines import HostLineProfile
    from torchdoctor.engine import RunResult

#: Steps run before the profiler starts in the profiling session (lazy init, autotuning).
PROFILE_WARMUP_STEPS: Final = 2
#: Seconds of steps the line sampler samples in a workload's diagnosis: at its 5 ms period
#: ~200 samples, enough to place a line holding 10% of the step within a few points
#: (collect/line_sampler.py), while adding about a second to the diagnosis.
LINE_SAMPLE_S: Final = 1.0
#: Fewest steps sampled, so that a slow step still leaves a steady step after the warm-up rule.
MIN_LINE_STEPS: Final = 3


def line_steps(run: RunResult, steps: int) -> int:
    """Steps to sample: `LINE_SAMPLE_S` of the run's median step, at least MIN_LINE_STEPS, at
    most the steps the run measured."""
    step_s = run.step_time.median
    wanted = math.ceil(LINE_SAMPLE_S / step_s) if step_s > 0 else steps
    return max(MIN_LINE_STEPS, min(steps, wanted))


def usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count()


def check_workload(
    name: str,
    settings: dict[str, str],
    device: str = "cpu",
    *,
    params: Mapping[str, Any] | None = None,
) -> None:
    """Raise the user's error (unknown workload or parameter, bad knob) before anything is
    written."""
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads import get_workload

    workload = get_workload(name, **dict(params or {}))
    Recipe.parse([f"{k}={v}" for k, v in settings.items()], workload=workload, device=device)


def profile_workload(
    name: str,
    settings: dict[str, str],
    *,
    steps: int,
    warmup: int,
    profile_steps: int,
    trace_path: Path,
    device: str = "cpu",
    params: Mapping[str, Any] | None = None,
) -> tuple[RunResult, str | None, Path | None, int | None]:
    """(run result, workload kind, trace path or None, usable cores); `params`: the
    workload's own."""
    from torchdoctor.engine import prepare, run_workload
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads import get_workload

    workload = get_workload(name, **dict(params or {}))
    recipe = Recipe.parse([f"{k}={v}" for k, v in settings.items()], workload=workload)
    run = run_workload(workload, recipe, steps=steps, warmup_steps=warmup, device=device)
    lines = _sample_lines(prepare(workload, recipe, device=device), line_steps(run, steps))
    run = run.model_copy(update={"host_lines": lines})
    trace: Path | None = None
    if profile_steps > 0:
        trace = _profile_window(prepare(workload, recipe, device=device), profile_steps, trace_path)
    return run, getattr(workload, "kind", None), trace, usable_cores()


def _sample_lines(session: object, steps: int) -> HostLineProfile | None:
    """The host time by line of `steps` steps (after PROFILE_WARMUP_STEPS), in a session of
    their own under the script instrumentation: its hooks see the engine's loop as a script's
    (optimizer steps, the DataLoader, module forwards), and the run's own numbers stay free of
    the hooks' and the sampler's cost. The workload's files count as the user's code."""
    from torchdoctor.collect import CollectConfig, Instrumentation

    config = CollectConfig(warmup=0, profile_steps=0, cuda_events=False)
    with session:  # type: ignore[attr-defined]
        inst = Instrumentation(config)
        with inst:
            session.run_steps(PROFILE_WARMUP_STEPS + steps, measure_phases=False)  # type: ignore[attr-defined]
    if inst.lines is None:
        return None
    return inst.lines.profile(inst.recorder.steps)


def _profile_window(session: object, steps: int, trace_path: Path) -> Path:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from torchdoctor.collect import export_gz, quiet_profiling

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with session:  # type: ignore[attr-defined]
        session.run_steps(PROFILE_WARMUP_STEPS, measure_phases=False)  # type: ignore[attr-defined]
        prof = profile(activities=activities, record_shapes=True, with_flops=True)
        with quiet_profiling(prof):
            # The window's steps run as one chunk, as a training loop runs them: one device
            # sync and one read of the losses at its end. A chunk per step added two syncs
            # to every step, which the host-sync rule then reported, and kept the next batch
            # from overlapping the device's work, inflating the data-wait share. The step
            # markers are those torch.profiler's own schedule writes, so the analyzer cuts
            # the window into steps; each closes when its step's work is queued.
            marker = _StepMarkers(steps, record_function)
            try:
                session.run_steps(  # type: ignore[attr-defined]
                    steps, measure_phases=False, on_step=marker.next
                )
            finally:
                marker.close()
    try:
        return export_gz(prof, trace_path)
    except (OSError, RuntimeError) as exc:
        raise DiagnoseError(
            f"could not write the workload's trace to {trace_path}: {exc}"
        ) from None


class _StepMarkers:
    """ProfilerStep#0 .. #n-1 around consecutive steps of one chunk (`next` after each)."""

    def __init__(self, steps: int, record_function: Any) -> None:
        self.steps, self.make = steps, record_function
        self.index = 0
        self.open: Any = None
        self._enter()

    def _enter(self) -> None:
        if self.index < self.steps:
            self.open = self.make(f"ProfilerStep#{self.index}")
            self.open.__enter__()

    def next(self) -> None:
        self.close()
        self.index += 1
        self._enter()

    def close(self) -> None:
        if self.open is not None:
            self.open.__exit__(None, None, None)
            self.open = None
