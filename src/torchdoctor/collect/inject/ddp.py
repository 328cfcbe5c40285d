"""DistributedDataParallel's settings, taken where the script builds its DDP module.

`DistributedDataParallel.__init__` is patched: the recipe's keywords (`DDPArgument.keyword`:
bucket_cap_mb, gradient_as_bucket_view, static_graph, find_unused_parameters) replace the
script's own, and a communication hook (`DDPArgument.hook`) is registered on the module once
it is built. A keyword the script already passes with the recipe's value, or leaves at DDP's
own default when that is the recipe's value, is recorded as not applied with why: the trial
would compare the job with itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from torchdoctor.collect._patching import user_site
from torchdoctor.collect.inject.base import (
    ALREADY_RUNS_WITH,
    InjectSite,
    KnobValue,
    Ledger,
    where,
)
from torchdoctor.collect.probes import ddp as ddp_probe
from torchdoctor.knobs import DDP_DEFAULT_BUCKET_MB, DDPArgument, get_knob, show_value


class DDPInjector:
    def __init__(self, values: dict[str, KnobValue], ledger: Ledger) -> None:
        self.ledger = ledger
        #: knob -> its part, and the value
        self.keywords: dict[str, tuple[str, KnobValue]] = {}
        self.hooks: dict[str, tuple[str, KnobValue]] = {}
        for knob, value in values.items():
            part = get_knob(knob).applies_to
            assert isinstance(part, DDPArgument)  # the catalogue test holds it to that
            ledger.expect(knob, value, "the script built no DistributedDataParallel module")
            if part.keyword is not None:
                self.keywords[knob] = (part.keyword, value)
            elif part.hook is not None:
                hook = part.hook(value)
                if hook is not None:
                    self.hooks[knob] = (hook, value)

    def install(self, site: InjectSite) -> None:
        cls = ddp_probe.ddp_class()
        site.patcher.set(cls, "__init__", self._constructor(cls.__init__))

    def _constructor(self, original: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(original)
        keywords, hooks, ledger = self.keywords, self.hooks, self.ledger

        # Positional-only: DDP's own first parameter is called `module`, and a wrapper under
        # this one (the DDP probe's) takes the keywords as DDP names them.
        def __init__(ddp: Any, /, *args: Any, **kwargs: Any) -> None:
            at = user_site(2)
            bound = signature.bind_partial(ddp, *args, **kwargs)
            acted = []
            for knob, (keyword, value) in keywords.items():
                own = bound.arguments.get(keyword, signature.parameters[keyword].default)
                if keyword == "bucket_cap_mb" and own is None:
                    own = DDP_DEFAULT_BUCKET_MB
                if own == value:
                    ledger.skipped(
                        knob,
                        f"the script's DistributedDataParallel {ALREADY_RUNS_WITH} "
                        f"{keyword}={show_value(value)}",
                    )
                    continue
                bound.arguments[keyword] = value
                acted.append((knob, f"{keyword}={show_value(value)} (was {show_value(own)})"))
            original(*bound.args, **bound.kwargs)
            for knob, what in acted:
                ledger.applied(knob, where(at, f"DistributedDataParallel({what})"))
            for knob, (hook, value) in hooks.items():
                try:
                    _register(ddp, hook)
                except (RuntimeError, TypeError, ValueError) as exc:
                    # torch refuses it here (bf16 wants NCCL 2.10+ on CUDA): the job runs as is
                    ledger.skipped(knob, f"torch refused {hook}: {exc}")
                    continue
                ledger.applied(
                    knob, where(at, f"register_comm_hook({hook}) for {show_value(value)}")
                )

        return __init__


def _register(module: Any, hook: str) -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    module.register_comm_hook(None, getattr(default_hooks, hook))
