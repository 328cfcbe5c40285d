"""`OptimizerProbe`: global optimizer step hooks time the optimizer phase and end steps.

A `GradScaler.step` that finds inf/NaN gradients (an fp16 overflow) skips `optimizer.step()`,
so no optimizer hook fires; without a boundary there, the skipped iteration would merge into
the next step. `GradScaler.step` is wrapped to end the step itself when the optimizer's step
did not run under it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.optim.optimizer as optim_mod

from torchdoctor.collect.probes import ProbeSite
from torchdoctor.collect.step_recorder import StepRecorder


@dataclass
class OptimizerCounts:
    #: optimizer.step() calls completed.
    steps: int = 0
    #: id(optimizer) -> the implementation it runs ("fused", "foreach", "for_loop").
    impls: dict[int, str] = field(default_factory=dict)
    #: GradScaler.step calls that skipped the optimizer's step (inf/NaN gradients).
    skipped: int = 0


def optimizer_impl(opt: Any) -> str:
    """ "fused", "foreach" or "for_loop": the implementation torch.optim will run.

    `foreach=None` (the default) means torch chooses: foreach when every parameter is on a
    CUDA device, the per-tensor loop otherwise (torch.optim.optimizer._default_to_fused_or_
    foreach).
    """
    defaults = getattr(opt, "defaults", {}) or {}
    if defaults.get("fused"):
        return "fused"
    foreach = defaults.get("foreach")
    if foreach is None:
        params = [p for g in getattr(opt, "param_groups", []) for p in g.get("params", [])]
        foreach = bool(params) and all(getattr(p, "is_cuda", False) for p in params)
    return "foreach" if foreach else "for_loop"


def _closure_outside_the_phase(
    recorder: StepRecorder, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, Any] | None:
    """`step(closure)` with the closure run outside the optimizer phase.

    A closure (LBFGS; Lightning's automatic optimization passes its whole training step as
    one) runs the forward and backward inside `optimizer.step`, so the optimizer phase would
    own their time. The wrapped closure ends the phase before it runs and begins it again
    after, so forward and backward are timed as their own phases. The pre-hook returns the new
    arguments (torch.optim's step pre-hooks may replace them); None: no closure, unchanged.
    """
    # torch.optim passes the hooks the step's own arguments, the optimizer itself first.
    closure = kwargs.get("closure", args[1] if len(args) > 1 else None)
    if not callable(closure):
        return None

    def timed(*a: Any, **kw: Any) -> Any:
        recorder.end("optimizer")
        try:
            return closure(*a, **kw)
        finally:
            recorder.begin("optimizer")

    if "closure" in kwargs:
        return args, {**kwargs, "closure": timed}
    return (args[0], timed, *args[2:]), kwargs


class OptimizerProbe:
    def __init__(self, recorder: StepRecorder) -> None:
        self.recorder = recorder
        self.counts = OptimizerCounts()

    def install(self, site: ProbeSite) -> None:
        recorder, counts = self.recorder, self.counts

        def pre(opt: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
            recorder.begin("optimizer")
            if id(opt) not in counts.impls:
                counts.impls[id(opt)] = optimizer_impl(opt)
            return _closure_outside_the_phase(recorder, args, kwargs)

        def post(_opt: Any, _args: Any, _kwargs: Any) -> None:
            recorder.end("optimizer")
            counts.steps += 1
            recorder.optimizer_step_end()

        site.handles.append(optim_mod.register_optimizer_step_pre_hook(pre))
        site.handles.append(optim_mod.register_optimizer_step_post_hook(post))
        original_init = optim_mod.Optimizer.__init__

        def init(opt: Any, *args: Any, **kwargs: Any) -> None:
            recorder.optimizer_exists = True  # its steps, not backward calls, end the steps
            original_init(opt, *args, **kwargs)

        site.patcher.set(optim_mod.Optimizer, "__init__", init)
        scaler_cls = torch.amp.GradScaler
        original_step = scaler_cls.step

        def scaler_step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            before = counts.steps
            result = original_step(scaler, optimizer, *args, **kwargs)
            if counts.steps == before:  # skipped: the update this iteration would have made
                counts.skipped += 1
                recorder.optimizer_step_end()
            return result

        site.patcher.set(scaler_cls, "step", scaler_step)

    def on_step_end(self) -> None:
        return None
