"""Reversible monkey-patching of torch attributes, and small helpers the wrappers share."""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import Any

import torch

#: Frames from these folders are torch's or ours, not the user's: a sync point is attributed to
#: the first frame outside them.
_INTERNAL_DIRS: tuple[str, ...] = (
    os.path.dirname(torch.__file__) + os.sep,
    os.path.dirname(__file__) + os.sep,
)
#: How many frames to walk up looking for user code (a call inside torch.nn.functional inside
#: a module forward is a handful of frames deep); past this the site is not recorded.
_MAX_SITE_DEPTH = 12


class Patcher:
    """Sets attributes and remembers the originals so `restore` undoes everything, in reverse."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any, bool]] = []

    def set(self, owner: Any, name: str, value: Any) -> Any:
        """Replace `owner.name` with `value`; return the original."""
        had_own = name in vars(owner) if isinstance(owner, type) else hasattr(owner, name)
        original = getattr(owner, name)
        self._saved.append((owner, name, vars(owner).get(name, original), had_own))
        setattr(owner, name, value)
        return original

    def restore(self) -> None:
        while self._saved:
            owner, name, original, had_own = self._saved.pop()
            if had_own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)


def user_site(depth: int = 2) -> str | None:
    """`file:line` of the nearest caller frame outside torch and torchdoctor, if any."""
    frame: FrameType | None
    try:
        frame = sys._getframe(depth)
    except ValueError:
        return None
    for _ in range(_MAX_SITE_DEPTH):
        if frame is None:
            return None
        filename = frame.f_code.co_filename
        if not filename.startswith(_INTERNAL_DIRS):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def batch_size_of(batch: Any) -> int | None:
    """Leading dimension of the first tensor in a batch (tensor, sequence or mapping)."""
    for _ in range(3):  # descend a few levels: ((x, y), meta) and {"input": x} are common
        if isinstance(batch, torch.Tensor):
            return int(batch.shape[0]) if batch.dim() > 0 else None
        if isinstance(batch, (list, tuple)) and batch:
            batch = batch[0]
        elif isinstance(batch, dict) and batch:
            batch = next(iter(batch.values()))
        else:
            return None
    return None


def target_device(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.device | None:
    """The device a `Tensor.to(...)` call moves to, or None when it only changes dtype etc."""
    candidates = [kwargs["device"]] if kwargs.get("device") is not None else list(args[:1])
    for arg in candidates:
        if isinstance(arg, torch.device):
            return arg
        if isinstance(arg, torch.Tensor):
            return arg.device
        if isinstance(arg, str):
            try:
                return torch.device(arg)
            except RuntimeError:
                return None
        if isinstance(arg, int) and not isinstance(arg, bool):
            return torch.device("cuda", arg)
    return None


def non_blocking_flag(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """`non_blocking` from kwargs or from the positional bool of `to(device, dtype, nb)`."""
    if "non_blocking" in kwargs:
        return bool(kwargs["non_blocking"])
    return any(isinstance(a, bool) and a for a in args[1:3])
