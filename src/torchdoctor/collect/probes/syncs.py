"""`SyncProbe`: host sync points the script makes, counted per step, timed, and located.

Counted: `Tensor.item/.cpu/.tolist/.numpy`, the scalar conversions `float(t)`, `int(t)`,
`bool(t)` (as `item`), tensor printing and `torch.cuda.synchronize`
(patched here), and device-to-host copies (`data.CopyProbe` hands them over). Not counted:
syncs outside a step, inside torch.optim or the data loader (the library's own), GradScaler's
found_inf read (the AMP recipe's own), and torchdoctor's own (`uncounted`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import types
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from torchdoctor.collect._patching import user_site
from torchdoctor.collect.probes import ProbeSite
from torchdoctor.collect.script_profile import SyncKind
from torchdoctor.collect.step_recorder import StepRecorder

#: Distinct sync call sites kept; a script syncing from more places than this is already
#: clearly sync-heavy, and the record stays small.
MAX_SYNC_SITES = 50
#: GradScaler's module (torch.amp.grad_scaler; torch.cuda.amp's is a thin subclass of it).
GRAD_SCALER_FILE = os.path.join("amp", "grad_scaler.py")
#: Frames walked up from a sync call to find who made it (wrapper, genexpr, caller).
_CALLER_FRAMES = 6
#: Tensor methods that wait for the device, and the kind each is counted as.
_COUNTED: tuple[tuple[str, SyncKind], ...] = (
    ("item", "item"),
    ("cpu", "cpu"),
    ("tolist", "tolist"),
    ("numpy", "numpy"),
    ("__repr__", "print"),
    ("__format__", "print"),
    # float(t), int(t), bool(t) (`if loss > best:`) and t as an index read the value as
    # .item() does, through the C conversions, not the Python method patched above.
    ("__float__", "item"),
    ("__int__", "item"),
    ("__bool__", "item"),
    ("__index__", "item"),
)


def _called_from(suffix: str, *, depth: int) -> bool:
    """Whether one of the few frames above `depth` runs code from a file ending in `suffix`."""
    frame: types.FrameType | None = sys._getframe(depth)
    for _ in range(_CALLER_FRAMES):
        if frame is None:
            return False
        if frame.f_code.co_filename.endswith(suffix):
            return True
        frame = frame.f_back
    return False


@dataclass
class SyncCounts:
    """Per closed step: sync points by kind, seconds blocked in them, and the part of those
    seconds outside every named phase (which the step recorder files under `other`)."""

    per_step: list[dict[SyncKind, int]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    outside_seconds: list[float] = field(default_factory=list)
    #: `file:line` of the script's sync calls, over the whole run
    sites: Counter[str] = field(default_factory=Counter)
    # the step in progress
    step: Counter[SyncKind] = field(default_factory=Counter)
    step_s: float = 0.0
    step_outside_s: float = 0.0

    def close_step(self) -> None:
        self.per_step.append(dict(self.step))
        self.seconds.append(self.step_s)
        self.outside_seconds.append(self.step_outside_s)
        self.step = Counter()
        self.step_s = self.step_outside_s = 0.0


class SyncProbe:
    def __init__(self, recorder: StepRecorder) -> None:
        self.recorder = recorder
        self.counts = SyncCounts()
        self._in_sync = False

    def install(self, site: ProbeSite) -> None:
        for name, kind in _COUNTED:
            site.patcher.set(torch.Tensor, name, self.counting(getattr(torch.Tensor, name), kind))
        site.patcher.set(
            torch.cuda, "synchronize", self.counting(torch.cuda.synchronize, "cuda_synchronize")
        )

    def on_step_end(self) -> None:
        self.counts.close_step()

    @contextlib.contextmanager
    def uncounted(self) -> Iterator[None]:
        """Syncs made by torchdoctor itself in here are not the script's: the profiler's
        stop calls torch.cuda.synchronize (the patched one) to flush the device's activity."""
        was, self._in_sync = self._in_sync, True
        try:
            yield
        finally:
            self._in_sync = was

    def counting(self, original: Callable[..., Any], kind: SyncKind) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._in_sync:  # printing calls .item() / .tolist() inside: count once
                return original(*args, **kwargs)
            return self.timed(original, kind, *args, **kwargs)

        return wrapper

    def timed(self, original: Callable[..., Any], kind: SyncKind, *args: Any, **kwargs: Any) -> Any:
        """Count a sync point and time the call: the time blocked in it is what it costs the
        host (on a GPU, the wait for the device queue to drain; on CPU, the conversion or
        formatting the call does).

        Called straight from the hooking wrapper (the frame depths below rely on it).
        """
        if not self._count(kind):
            return original(*args, **kwargs)
        outside = self.recorder.active_phase is None
        self._in_sync = True
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - start
            self._in_sync = False
            self.counts.step_s += elapsed
            if outside:
                self.counts.step_outside_s += elapsed

    def _count(self, kind: SyncKind) -> bool:
        """Count a sync point made by the script; False for one that does not count."""
        # torch.optim reads its step counters with .item() and collate builds batches: those
        # are the library's own, not the script's sync points.
        if not self.recorder.in_step or self.recorder.active_phase in ("optimizer", "data_wait"):
            return False
        # GradScaler.step reads its found_inf flags with .item() before optimizer.step (in
        # torch.amp.grad_scaler's _maybe_opt_step): the AMP recipe's own sync, not the script's.
        # Depth 3: this frame, timed, then the hooking wrapper the caller called.
        if _called_from(GRAD_SCALER_FILE, depth=3):
            return False
        counts = self.counts
        counts.step[kind] += 1
        site = user_site(3)
        if site is not None and (site in counts.sites or len(counts.sites) < MAX_SYNC_SITES):
            counts.sites[site] += 1
        return True
