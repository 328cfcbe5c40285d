"""What a distributed job's rank runs with: its DDP modules' unused-parameter search and the
debug level torch.distributed was left at (the diagnosis rules' `DistributedEvidence`)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import torch

from torchdoctor.collect.probes import ProbeSite
from torchdoctor.collect.script_profile import DistributedInfo

#: torch.distributed's debug switch (its docs, "Debugging torch.distributed applications").
DEBUG_ENV = "TORCH_DISTRIBUTED_DEBUG"
#: The launcher's count of ranks on this host (torchrun sets it in every rank).
LOCAL_WORLD_SIZE_ENV = "LOCAL_WORLD_SIZE"


def ddp_class() -> type[Any]:
    """The class patched here and by the injection (collect/inject/ddp.py); a test's stand-in
    replaces it."""
    return torch.nn.parallel.DistributedDataParallel


class DDPProbe:
    """`DistributedDataParallel.__init__`, wrapped to read each built module's settings (after
    any injected recipe changed them: the injection wraps this probe's wrapper)."""

    def __init__(self) -> None:
        #: find_unused_parameters of each DDP module built, in order
        self.find_unused: list[bool] = []

    def install(self, site: ProbeSite) -> None:
        cls = ddp_class()
        original: Callable[..., None] = cls.__init__
        found = self.find_unused

        # wraps: the injection (collect/inject/ddp.py) reads DDP's signature through it
        @functools.wraps(original)
        def __init__(ddp: Any, /, *args: Any, **kwargs: Any) -> None:
            original(ddp, *args, **kwargs)
            found.append(bool(getattr(ddp, "find_unused_parameters", False)))

        site.patcher.set(cls, "__init__", __init__)

    def on_step_end(self) -> None:
        return None

    def info(self) -> DistributedInfo:
        local = os.environ.get(LOCAL_WORLD_SIZE_ENV)
        return DistributedInfo(
            debug=os.environ.get(DEBUG_ENV),
            local_world_size=int(local) if local and local.isdigit() else None,
            find_unused_parameters=list(self.find_unused),
        )
