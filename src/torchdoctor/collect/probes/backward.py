"""`BackwardProbe`: `Tensor.backward` and `torch.autograd.backward` time the backward phase."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from torchdoctor.collect.probes import ProbeSite
from torchdoctor.collect.step_recorder import StepRecorder


@dataclass
class BackwardCounts:
    #: Outermost backward calls (a backward inside another phase is part of that phase).
    calls: int = 0


class BackwardProbe:
    def __init__(self, recorder: StepRecorder, on_backward: Callable[[], None]) -> None:
        self.recorder = recorder
        #: Called after each outermost backward (the forward probe counts what it consumed).
        self.on_backward = on_backward
        self.counts = BackwardCounts()

    def install(self, site: ProbeSite) -> None:
        recorder, counts = self.recorder, self.counts

        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            def backward(*args: Any, **kwargs: Any) -> Any:
                outermost = recorder.active_phase is None
                recorder.begin("backward")
                try:
                    return original(*args, **kwargs)
                finally:
                    recorder.end("backward")
                    if outermost:
                        counts.calls += 1
                        self.on_backward()

            return backward

        site.patcher.set(torch.Tensor, "backward", wrap(torch.Tensor.backward))
        site.patcher.set(torch.autograd, "backward", wrap(torch.autograd.backward))

    def on_step_end(self) -> None:
        return None
