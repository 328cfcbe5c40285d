"""Optimizer implementation (for-loop, foreach, fused) at construction, and zero_grad's
set_to_none on every call.

The implementation is set by patching `__init__` of each torch.optim class that takes the
`foreach`/`fused` keywords (so a script's own subclass of one gets it too); a class without
the requested implementation (fused on Adafactor, RMSprop, ...) keeps its own, with the reason
recorded. A fused construction that torch refuses (an unsupported device or dtype) is built
again with the script's own arguments, with torch's message as the reason.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.optim.optimizer as optim_mod

from torchdoctor.collect._patching import user_site
from torchdoctor.collect.inject.base import InjectSite, KnobValue, Ledger, where
from torchdoctor.knobs import OPTIMIZER_IMPL, SET_TO_NONE, OptimizerArgument, show_value


def impl_classes() -> list[type[torch.optim.Optimizer]]:
    """torch.optim classes whose own constructor takes `foreach` or `fused`."""
    found = []
    for cls in vars(torch.optim).values():
        if not (isinstance(cls, type) and issubclass(cls, optim_mod.Optimizer)):
            continue
        if "__init__" not in vars(cls):
            continue
        params = inspect.signature(cls.__init__).parameters
        if "foreach" in params or "fused" in params:
            found.append(cls)
    return found


class OptimizerInjector:
    def __init__(self, values: dict[str, KnobValue], ledger: Ledger) -> None:
        impl, set_to_none = values.get(OPTIMIZER_IMPL.name), values.get(SET_TO_NONE.name)
        self.impl = str(impl) if impl is not None else None
        self.set_to_none = bool(set_to_none) if set_to_none is not None else None
        self.ledger = ledger
        if impl is not None:
            ledger.expect(
                OPTIMIZER_IMPL.name,
                impl,
                "the script built no torch.optim optimizer that takes foreach/fused",
            )
        if set_to_none is not None:
            ledger.expect(SET_TO_NONE.name, set_to_none, "the script never called zero_grad")
        self._building: set[int] = set()

    def install(self, site: InjectSite) -> None:
        if self.impl is not None:
            for cls in impl_classes():
                site.patcher.set(cls, "__init__", self._constructor(cls, cls.__init__))
        if self.set_to_none is not None:
            for owner in (optim_mod.Optimizer, torch.nn.Module):
                site.patcher.set(owner, "zero_grad", self._zero_grad(owner.zero_grad))

    def _constructor(self, cls: type, original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)
        accepts = set(signature.parameters)
        impl, ledger, building = str(self.impl), self.ledger, self._building
        part = OPTIMIZER_IMPL.applies_to
        assert isinstance(part, OptimizerArgument)  # the catalogue test holds it to that

        def init(opt: Any, *args: Any, **kwargs: Any) -> None:
            # AdamW's constructor calls Adam's: only the outermost patched one sets the impl.
            if id(opt) in building:
                return original(opt, *args, **kwargs)
            try:
                bound = signature.bind(opt, *args, **kwargs)
            except TypeError:
                return original(opt, *args, **kwargs)
            site = user_site(2)
            wanted = dict(part.kwargs(impl))
            missing = [k for k, v in wanted.items() if v and k not in accepts]
            if missing:
                ledger.skipped(
                    OPTIMIZER_IMPL.name,
                    where(site, f"torch.optim.{cls.__name__} has no {missing[0]} implementation"),
                )
                return original(opt, *args, **kwargs)
            params = bound.arguments.get("params")
            if isinstance(params, Iterator):  # a generator is spent by a first attempt
                bound.arguments["params"] = list(params)
            script = {k: bound.arguments.get(k) for k in wanted if k in accepts}
            for key, value in wanted.items():
                if key in accepts:
                    bound.arguments[key] = value
            building.add(id(opt))
            try:
                original(*bound.args, **bound.kwargs)
            except (RuntimeError, ValueError) as exc:
                for key, value in script.items():
                    bound.arguments[key] = value
                original(*bound.args, **bound.kwargs)
                ledger.skipped(OPTIMIZER_IMPL.name, where(site, f"torch refused it: {exc}"))
                return None
            finally:
                building.discard(id(opt))
            shown = ", ".join(f"{k}={show_value(v)}" for k, v in script.items())
            ledger.applied(OPTIMIZER_IMPL.name, where(site, f"{cls.__name__}({shown}) -> {impl}"))
            return None

        return init

    def _zero_grad(self, original: Callable[..., Any]) -> Callable[..., Any]:
        value, ledger = bool(self.set_to_none), self.ledger
        seen = False

        def zero_grad(obj: Any, *args: Any, **kwargs: Any) -> Any:
            nonlocal seen
            script = kwargs.pop("set_to_none", args[0] if args else True)
            if not seen or bool(script) != value:
                seen = True
                ledger.applied(
                    SET_TO_NONE.name,
                    where(
                        user_site(2),
                        f"zero_grad(set_to_none={show_value(script)}) -> {show_value(value)}",
                    ),
                )
            return original(obj, set_to_none=value)

        return zero_grad
