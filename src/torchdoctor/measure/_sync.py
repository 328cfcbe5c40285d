"""Device synchronization: wait for queued device work before a host clock is read.

CUDA (and ROCm, MPS, XPU) kernels run asynchronously: a host clock read right after a launch
measures the launch, not the work. Every timed block therefore ends with a synchronize, the
same protocol torch.utils.benchmark uses. On CPU there is nothing to wait for.
"""

from __future__ import annotations

import sys
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


def sync_cuda_if_initialized() -> None:
    """Synchronize the current CUDA device if this process has initialized CUDA.

    For timing without a named device (`torchdoctor bench 'a @ b'`, `compare`): a statement
    that created a CUDA tensor queued its kernels asynchronously, and without this wait the
    host clock would time their launch only. CUDA is initialized lazily by the first CUDA
    call, so `torch.cuda.is_initialized()` says whether anything could be queued; a CPU-only
    statement never initializes it and pays one cheap check. torch is only looked up, not
    imported: if nothing imported it, nothing can be on a device.
    """
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def make_sync(device: Any = None) -> Callable[[], None]:
    """A zero-argument synchronize for `device`; a no-op on CPU so the hot path stays cheap.

    `device=None` (not named) synchronizes CUDA whenever it is initialized, see
    `sync_cuda_if_initialized`; an explicit "cpu" never synchronizes anything.
    """
    if device is None:
        return sync_cuda_if_initialized
    if device_type(device) == "cpu":
        return _no_sync

    def sync() -> None:
        synchronize(device)

    return sync
