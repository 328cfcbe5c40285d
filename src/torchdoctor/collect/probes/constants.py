"""Constant tensors moved to the device inside the loop: the same host tensor, unchanged,
copied step after step (`CopyProbe` reports each host-to-device copy here).

A batch is a new tensor every step, even when the allocator hands it the address of the last
one, so a source is followed by identity (a weak reference: the tracker keeps nothing alive)
and by its version counter (an in-place refill is new data, not a constant). A source copied
in `CONSTANT_MIN_STEPS` or more steps, unchanged, is a constant the script could move once.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Final

import torch

from torchdoctor.collect._patching import user_site

#: Steps in which one unchanged host tensor must be copied to count as a constant: a tensor
#: copied in a single step is a batch; two could be an accumulation's micro-batches sharing
#: a step; three distinct steps is a tensor the loop keeps re-sending.
CONSTANT_MIN_STEPS: Final = 3
#: Sources followed at once; past this the dead ones are dropped first, then the oldest
#: (batches die every step, so a script rarely gets near it).
MAX_TRACKED: Final = 256


@dataclass
class _Source:
    ref: weakref.ref[torch.Tensor]
    version: int
    nbytes: int
    site: str | None
    steps: set[int] = field(default_factory=set)
    copies: int = 0


@dataclass
class ConstantCopies:
    """What the copies of repeated, unchanged host tensors added up to."""

    _sources: dict[int, _Source] = field(default_factory=dict)
    _done: list[_Source] = field(default_factory=list)

    def saw(self, t: torch.Tensor, step: int, *, depth: int) -> None:
        """`t` was copied to a device during step `step`; `depth` frames up is the caller."""
        key = id(t)
        src = self._sources.get(key)
        version = t._version
        if src is None or src.ref() is not t or src.version != version:
            if src is not None:
                self._done.append(src)
            if len(self._sources) >= MAX_TRACKED:
                self._prune()
            src = _Source(
                ref=weakref.ref(t),
                version=version,
                nbytes=t.numel() * t.element_size(),
                site=user_site(depth + 1),
            )
            self._sources[key] = src
        src.steps.add(step)
        src.copies += 1

    def _prune(self) -> None:
        dead = [k for k, s in self._sources.items() if s.ref() is None]
        for k in dead or list(self._sources)[: MAX_TRACKED // 2]:
            self._done.append(self._sources.pop(k))

    def constants(self) -> list[_Source]:
        every = [*self._done, *self._sources.values()]
        return [s for s in every if len(s.steps) >= CONSTANT_MIN_STEPS]
