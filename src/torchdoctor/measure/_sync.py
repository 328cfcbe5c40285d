"""Device synchronization: wait for queued device work before a host clock is read.

CUDA (and ROCm, MPS, XPU) kernels run asynchronously: a host clock read right after a launch
measures the launch, not the work. Every timed block therefore ends with a synchronize, the
same protocol torch.utils.benchmark uses. On CPU there is nothing to wait for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def device_type(device: Any) -> str:
    """ "cuda:1" / torch.device("cuda", 1) -> "cuda"; None -> "cpu"."""
    if device is None:
        return "cpu"
    text = str(getattr(device, "type", device))
    return text.split(":", 1)[0].lower()


def synchronize(device: Any = None) -> None:
    """Block until all work queued on `device` ("cpu", "cuda", "cuda:1", "mps", ...) is done."""
    kind = device_type(device)
    if kind == "cpu":
        return
    import torch

    # ROCm builds expose HIP devices as "cuda", so one branch covers both.
    if kind == "cuda" and torch.cuda.is_available():
        torch.cuda.synchronize(device)
    elif kind == "mps" and torch.backends.mps.is_available():
        torch.mps.synchronize()
    elif kind == "xpu" and hasattr(torch, "xpu") and torch.xpu.is_available():
        torch.xpu.synchronize(device)


def _no_sync() -> None:
    return None


def make_sync(device: Any = None) -> Callable[[], None]:
    """A zero-argument synchronize for `device`; a no-op on CPU so the hot path stays cheap."""
    if device_type(device) == "cpu":
        return _no_sync

    def sync() -> None:
        synchronize(device)

    return sync
