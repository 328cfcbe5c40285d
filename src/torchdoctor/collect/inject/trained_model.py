"""The model knobs in a script: the trained top-level module found, each model knob's own part
applied to it (`Script.on_model`, `knobs/script_model.py`), and fp16's GradScaler around
`loss.backward()` and `optimizer.step()`.

The trained top-level module (the rule; docs in `collect/inject/__init__.py` too): the first
module called from outside any other module's call, with grad enabled and in training mode,
that owns parameters of a torch.optim optimizer built before that call. With no optimizer
built by then (parameters updated by hand, or an optimizer built after a first forward), the
first such call of a module with trainable parameters. A module is found at its first call,
before that call runs, so every knob acts from the first training step on: watching is a
patched `nn.Module.__call__`, put back as soon as the module is found (no cost per module
call afterwards).

With a perturbation index (`Injection(perturbation=i)`, a tuner's quality-reference run) the
module's floating parameters first get the engine's no-op perturbation `i`
(`torchdoctor.engine.perturb_weights`: each times 1 + 2**-8 * U(-1, 1)).

What the built-in knobs' parts do to that module, once (raw transforms, then called ones,
then forward contexts; the parts live in the knobs' modules, so a new model knob needs no code
here):
- checkpointing: each of its repeated blocks (the largest ModuleList/Sequential of two or
  more modules of one class) runs under torch.utils.checkpoint (use_reentrant=False);
- channels_last: `.to(memory_format=torch.channels_last)`, and every 4-D floating-point
  input of its forward converted likewise (only when its first call has such an input);
- compile: its forward replaced by `torch.compile(forward, mode, dynamic)`;
- precision: that forward run under `torch.autocast(device type of its parameters, dtype)`;
  fp16 adds a `torch.amp.GradScaler` of that device type (torch 2.13 has one for CPU too,
  as the engine uses): `loss.backward()` of a scalar backs up the scaled loss, and the
  `step()` of an optimizer of the model's parameters becomes `scaler.step(opt)` +
  `scaler.update()` (a step whose gradients hold inf/NaN is skipped, the scale backs off).

The forward and the optimizers' `step` are replaced as instance attributes and put back at
uninstall; the parameters' memory format is not converted back. Until then a pickled or copied
module leaves the replaced forward out (`ProbeSite.replace`): `torch.save(model, f)` and
`copy.deepcopy(model)` give the module the script built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.optim.optimizer as optim_mod
from torch import nn

from torchdoctor.collect._patching import user_site
from torchdoctor.collect.inject.base import InjectSite, KnobValue, Ledger
from torchdoctor.knobs import (
    FoundModel,
    KnobForward,
    make_grad_scaler,
    model_parts,
    scales_loss,
)

UNREACHED = (
    "no trained module was seen: no module owning an optimizer's parameters was called with "
    "grad enabled in training mode"
)

GradScalerFactory = Callable[[str], Any]


def _default_scaler(device_type: str) -> Any:
    return make_grad_scaler("fp16", device_type)


class ModelInjector:
    """Finds the trained top-level module and applies the model knobs to it through their
    parts (`Script.on_model`; module doc)."""

    def __init__(
        self,
        values: dict[str, KnobValue],
        ledger: Ledger,
        *,
        grad_scaler: GradScalerFactory = _default_scaler,
        compile_backend: str | None = None,
        perturbation: int = 0,
    ) -> None:
        self.values = values
        #: index of the engine's no-op weight perturbation applied to the model when found
        #: (0: none); the quality yardstick of a tuned script (procs/_script.py)
        self.perturbation = perturbation
        self.ledger = ledger
        self.grad_scaler = grad_scaler
        #: torch.compile's backend; None: inductor (tests pass "eager" to skip code generation)
        self.compile_backend = compile_backend
        #: Called with the trained model just before its forward is compiled (the launcher
        #: moves the forward probe's global hooks onto it: `ForwardProbe.pin`).
        self.on_compile: Callable[[nn.Module], None] | None = None
        for knob, value in values.items():
            ledger.expect(knob, value, UNREACHED)
        self.model: nn.Module | None = None
        self.device_type: str | None = None
        self.scaler: Any = None
        self._site: InjectSite | None = None
        self._optimizers: list[Any] = []
        self._opt_params: set[int] = set()
        self._model_params: set[int] = set()
        self._scaled_pending = False
        self._original_call: Callable[..., Any] | None = None

    # ---- install ---------------------------------------------------------------------------

    def install(self, site: InjectSite) -> None:
        self._site = site
        site.keep_copies_plain()
        self._watch_optimizers(site)
        self._watch_calls(site)
        if scales_loss(self.values):
            self._scale_backward(site)

    def _watch_optimizers(self, site: InjectSite) -> None:
        original = optim_mod.Optimizer.__init__
        fp16 = scales_loss(self.values)

        def init(opt: Any, *args: Any, **kwargs: Any) -> None:
            original(opt, *args, **kwargs)
            if any(o is opt for o in self._optimizers):
                return
            self._optimizers.append(opt)
            self._opt_params.update(id(p) for g in opt.param_groups for p in g["params"])
            if fp16:
                self._scale_steps(opt)

        site.patcher.set(optim_mod.Optimizer, "__init__", init)

    def _watch_calls(self, site: InjectSite) -> None:
        original = nn.Module.__call__
        self._original_call = original
        depth = 0

        def call(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            nonlocal depth
            if self.model is None and depth == 0 and self._is_trained(module):
                self._found(module, args, kwargs)
                nn.Module.__call__ = original  # type: ignore[method-assign]
                return original(module, *args, **kwargs)
            depth += 1
            try:
                return original(module, *args, **kwargs)
            finally:
                depth -= 1

        site.patcher.set(nn.Module, "__call__", call)

    def _is_trained(self, module: nn.Module) -> bool:
        if not (torch.is_grad_enabled() and module.training):
            return False
        ids = [id(p) for p in module.parameters() if p.requires_grad]
        if not ids:
            return False
        if self._opt_params:
            return any(i in self._opt_params for i in ids)
        return True

    # ---- the model, found ------------------------------------------------------------------

    def _found(self, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        site = self._site
        assert site is not None
        self.model = model
        self._model_params = {id(p) for p in model.parameters()}
        first = next(model.parameters())
        self.device_type = first.device.type
        if self.perturbation > 0:
            # Before its first forward, so before its first step: the run trains from the
            # perturbed initial weights, as a workload's reference session does.
            from torchdoctor.engine import perturb_weights

            perturb_weights(model, self.perturbation)
        found = FoundModel(
            model=model,
            args=args,
            kwargs=kwargs,
            device_type=self.device_type,
            settings=self.values,
            called_at=user_site(3),
            replace=site.replace,
            applied=self.ledger.applied,
            skipped=self.ledger.skipped,
            grad_scaler=self.grad_scaler,
            compile_backend=self.compile_backend,
            on_compile=self.on_compile,
        )
        for knob, on_model in model_parts(self.values):
            on_model(self.values[knob.name], found)
        self.scaler = found.scaler
        if found.channels_last or found.autocast is not None or found.forward is not None:
            site.replace(
                model,
                "forward",
                KnobForward(
                    model.forward,
                    found.forward,
                    channels_last=found.channels_last,
                    autocast=found.autocast,
                ),
            )

    # ---- fp16: the GradScaler --------------------------------------------------------------

    def _scale_backward(self, site: InjectSite) -> None:
        original = torch.Tensor.backward

        def backward(loss: torch.Tensor, gradient: Any = None, *args: Any, **kwargs: Any) -> Any:
            if self.scaler is not None and gradient is None and loss.numel() == 1:
                self._scaled_pending = True
                return original(self.scaler.scale(loss), None, *args, **kwargs)
            return original(loss, gradient, *args, **kwargs)

        site.patcher.set(torch.Tensor, "backward", backward)

    def _scale_steps(self, opt: Any) -> None:
        """`opt.step()` -> `scaler.step(opt)` + `scaler.update()` once the model's loss was
        scaled and `opt` holds the model's parameters."""
        site = self._site
        assert site is not None
        step = opt.step
        inside = False

        def scaled_step(*args: Any, **kwargs: Any) -> Any:
            nonlocal inside
            scaler = self.scaler
            if inside or scaler is None or not self._scaled_pending or not self._owns(opt):
                return step(*args, **kwargs)
            inside = True
            try:
                result = scaler.step(opt, *args, **kwargs)
                scaler.update()
            finally:
                inside = False
                self._scaled_pending = False
            return result

        # Optimizer.__getstate__ keeps only its defaults, state and param groups: a copy of
        # `opt` has the class's step.
        site.replace(opt, "step", scaled_step)

    def _owns(self, opt: Any) -> bool:
        return any(id(p) in self._model_params for g in opt.param_groups for p in g["params"])
