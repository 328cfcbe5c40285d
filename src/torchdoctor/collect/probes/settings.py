"""What the script sets: `zero_grad(set_to_none=...)` calls and the dtypes of autocast regions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.optim.optimizer as optim_mod

from torchdoctor.collect.probes import ProbeSite
from torchdoctor.collect.step_recorder import StepRecorder


@dataclass
class ZeroGradCounts:
    calls: int = 0
    #: calls with set_to_none=False (gradients zeroed in place, then read and added to)
    keep: int = 0


class ZeroGradProbe:
    """`Optimizer.zero_grad` and `Module.zero_grad`, counted with their set_to_none."""

    def __init__(self) -> None:
        self.counts = ZeroGradCounts()

    def install(self, site: ProbeSite) -> None:
        counts = self.counts

        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            def zero_grad(obj: Any, *args: Any, **kwargs: Any) -> Any:
                counts.calls += 1
                set_to_none = kwargs.get("set_to_none", args[0] if args else True)
                if not set_to_none:
                    counts.keep += 1
                return original(obj, *args, **kwargs)

            return zero_grad

        site.patcher.set(optim_mod.Optimizer, "zero_grad", wrap(optim_mod.Optimizer.zero_grad))
        site.patcher.set(torch.nn.Module, "zero_grad", wrap(torch.nn.Module.zero_grad))

    def on_step_end(self) -> None:
        return None


class AutocastProbe:
    """The dtypes of autocast regions entered inside a step: the precision the model computes
    in, which the roofline and the precision rule need."""

    def __init__(self, recorder: StepRecorder) -> None:
        self.recorder = recorder
        self.dtypes: set[str] = set()

    def install(self, site: ProbeSite) -> None:
        autocast_cls = torch.amp.autocast_mode.autocast
        original = autocast_cls.__enter__
        dtypes, recorder = self.dtypes, self.recorder

        def enter(ctx: Any) -> Any:
            if recorder.in_step and getattr(ctx, "_enabled", False):
                dtypes.add(str(getattr(ctx, "fast_dtype", "")).removeprefix("torch."))
            return original(ctx)

        site.patcher.set(autocast_cls, "__enter__", enter)

    def on_step_end(self) -> None:
        return None
