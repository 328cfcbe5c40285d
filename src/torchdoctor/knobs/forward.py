"""A module's forward replaced by a knob, as an object that copies and pickles like the forward
it replaced.

A knob that acts inside a module's call (activation checkpointing of a block, autocast and
channels_last inputs around an injected model, an injected torch.compile) replaces the
module's `forward` by an instance attribute. A closure there would make the module fail
`torch.save(model, f)` ("Can't pickle local object"), and `copy.deepcopy(model)` (an EMA or
SWA copy) would share the closure, so the copy's forward would run the *original* module's
weights. These wrappers are module-level callables whose pickled and copied form is the
forward they replaced: a saved or copied model is the user's model, without the knob, and
loads where torchdoctor is not imported. (The script injection goes one step further and
leaves the instance attribute out of a module's copies entirely: `ProbeSite.replace`.)
"""

from __future__ import annotations

import contextlib
import inspect
import operator
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from torchdoctor.knobs.memory_format import inputs_to_channels_last


def reduce_to(original: Callable[..., Any]) -> tuple[Any, ...]:
    """A `__reduce__` value that rebuilds `original` (a bound method or a picklable callable).

    A bound method is rebuilt by name on its (pickled or copied) owner, as pickle itself does:
    while the owner's own state is being restored, the name resolves to its class's method.
    """
    if inspect.ismethod(original):
        return getattr, (original.__self__, original.__func__.__name__)
    # itemgetter(0)((x,)) is x: rebuilds any picklable object with no import of ours.
    return operator.itemgetter(0), ((original,),)


class ReplacedForward:
    """A forward standing in for `original`; pickled and copied, it is `original` again."""

    def __init__(self, original: Callable[..., Any]) -> None:
        self.original = original

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.original(*args, **kwargs)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return reduce_to(self.original)


class CheckpointedForward(ReplacedForward):
    """The forward run under torch.utils.checkpoint: its activations are recomputed in backward.

    use_reentrant=False is the recommended variant: it supports kwargs and inputs that do not
    require grad (torch.utils.checkpoint docs).
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return checkpoint(self.original, *args, use_reentrant=False, **kwargs)


class KnobForward(ReplacedForward):
    """`forward` (the original, or a torch.compile of it) with its 4-D floating-point inputs in
    channels_last and run under `torch.autocast(device_type, dtype)`, as the knobs ask."""

    def __init__(
        self,
        original: Callable[..., Any],
        forward: Callable[..., Any] | None = None,
        *,
        channels_last: bool = False,
        autocast: tuple[str, torch.dtype] | None = None,
    ) -> None:
        super().__init__(original)
        self.forward = original if forward is None else forward
        self.channels_last = channels_last
        self.autocast = autocast

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.channels_last:
            args, kwargs = inputs_to_channels_last(args), inputs_to_channels_last(kwargs)
        context = (
            torch.autocast(device_type=self.autocast[0], dtype=self.autocast[1])
            if self.autocast is not None
            else contextlib.nullcontext()
        )
        with context:
            return self.forward(*args, **kwargs)
