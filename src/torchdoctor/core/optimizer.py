"""How a torch.optim constructor is told its implementation: for-loop, foreach or fused.

Shared by the workloads (which build their optimizers with it) and the `optimizer_impl` knob
(whose values these are), so neither has to import the other. torch is only needed for the
annotations: the constructor is whatever class the caller passes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

OPTIMIZER_IMPLS = ("for_loop", "foreach", "fused")


def impl_kwargs(impl: str) -> dict[str, Any]:
    """Keyword arguments selecting an implementation in torch.optim constructors."""
    if impl == "for_loop":
        return {"foreach": False, "fused": False}
    if impl == "foreach":
        return {"foreach": True, "fused": False}
    if impl == "fused":
        return {"foreach": False, "fused": True}
    raise ValueError(f"unknown optimizer implementation {impl!r}; expected {OPTIMIZER_IMPLS}")


def make_optimizer(
    cls: type[torch.optim.Optimizer],
    params: Iterable[torch.nn.Parameter],
    impl: str,
    **hyper: Any,
) -> torch.optim.Optimizer:
    """Build `cls(params, **hyper)` with the implementation `impl` selected."""
    return cls(params, **hyper, **impl_kwargs(impl))
