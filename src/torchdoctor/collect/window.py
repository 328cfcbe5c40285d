"""The profiled window: skip K warm-up steps, run torch.profiler over the next M steps.

Outside the window nothing per-op is hooked, so the script runs at (nearly) full speed. Each
profiled step is wrapped in a `ProfilerStep#<index>` range, the name torch.profiler's own
schedule uses, so trace readers can cut the trace into steps.
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
from pathlib import Path
from typing import Any

from torchdoctor.collect.quiet import quietly
from torchdoctor.core.io import atomic_path


class ProfileWindow:
    """Starts and stops torch.profiler on step boundaries and exports a `.json.gz` trace."""

    def __init__(self, *, warmup: int, steps: int, trace_path: Path | None) -> None:
        self.warmup = max(0, warmup)
        self.steps = steps if trace_path is not None else 0
        self.trace_path = trace_path
        self.written: Path | None = None
        self.profiled_steps: list[int] = []
        self.errors: list[str] = []
        self._prof: Any = None
        self._step_range: Any = None

    @property
    def active(self) -> bool:
        return self._prof is not None

    def on_install(self) -> None:
        if self.steps > 0 and self.warmup == 0:
            self._start(0)

    def on_step_end(self, closed: int) -> None:
        """`closed` steps are complete; step index `closed` starts now."""
        if self.steps <= 0:
            return
        if self._prof is not None:
            self.profiled_steps.append(closed - 1)
            self._exit_step_range()
            if closed >= self.warmup + self.steps:
                self.stop()
                return
            self._enter_step_range(closed)
        elif closed == self.warmup and self.written is None:
            self._start(closed)

    def _start(self, index: int) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        try:
            prof = profile(activities=activities, record_shapes=True, with_flops=True)
            quietly(prof.__enter__)
        except Exception as exc:  # a profiler that cannot start must not kill the script
            self.errors.append(f"profiler did not start: {type(exc).__name__}: {exc}")
            self.steps = 0
            return
        self._prof = prof
        self._enter_step_range(index)

    def _enter_step_range(self, index: int) -> None:
        import torch

        self._step_range = torch.autograd.profiler.record_function(f"ProfilerStep#{index}")
        self._step_range.__enter__()

    def _exit_step_range(self) -> None:
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
            self._step_range = None

    def stop(self) -> None:
        """Stop profiling (if running) and write the trace; safe to call more than once."""
        self.steps = 0  # a window runs once: never restart after stopping
        prof = self._prof
        if prof is None:
            return
        self._prof = None
        self._exit_step_range()
        try:
            quietly(lambda: prof.__exit__(None, None, None))
            if self.profiled_steps and self.trace_path is not None:
                self.written = export_gz(prof, self.trace_path)
        except Exception as exc:
            self.errors.append(f"trace export failed: {type(exc).__name__}: {exc}")


def export_gz(prof: Any, path: Path) -> Path:
    """Export the Chrome/Kineto JSON, then gzip it into place atomically."""
    with tempfile.TemporaryDirectory(prefix="torchdoctor-trace-") as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        with atomic_path(path) as out, raw.open("rb") as src, gzip.open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
    return path
