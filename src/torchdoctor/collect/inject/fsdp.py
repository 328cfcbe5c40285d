"""FSDP2's settings, taken where the script calls `fully_shard(module, ...)`.

`torch.distributed.fsdp.fully_shard` is patched (where a script imports it from: the public
package and its `_fully_shard` package): the recipe's keywords (`FSDPArgument.keywords`:
reshard_after_forward, mp_policy, offload_policy) replace the script's own, and explicit
prefetching (`FSDPArgument.prefetch`) is set on the sharded blocks as they are made.

A call shards a *block* when its module holds no module sharded before it (fully_shard is
called bottom-up, its docstring says), and the *root* otherwise. A knob that sets the blocks
only (`blocks_only`: reshard_after_forward) leaves the root's call as the script wrote it:
FSDP keeps the root's parameters after forward since backward needs them first. Prefetching
follows the blocks in the order they were sharded, which is the order forward runs them in
the scripts fully_shard's docstring describes (`for layer in model.layers: fully_shard(layer)`).

The unit of wrapping (`FSDPArgument.units`: fsdp_wrap) acts at a call that shards a module
holding no module sharded before it, where the script shards its root only: the module's
repeated blocks are sharded first, each by its own call with the script's arguments (and the
other knobs' keywords, as blocks), then the module itself, now a root over them. A script that
shards its blocks itself, or a module with no repeated blocks, is recorded as not applied
with why.

A keyword the script already passes with the recipe's value is recorded as not applied with
why: the trial would compare the job with itself. An int `reshard_after_forward` that does not
divide the shard group (`FSDPArgument.for_world`) is recorded the same way, and the call runs
as written.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from torchdoctor.collect._patching import user_site
from torchdoctor.collect.inject.base import (
    ALREADY_RUNS_WITH,
    InjectSite,
    KnobValue,
    Ledger,
    where,
)
from torchdoctor.knobs import FSDPArgument, get_knob, show_value

#: Why a knob did not act when the script never called fully_shard.
NO_FULLY_SHARD = "the script sharded no module with torch.distributed.fsdp.fully_shard"
#: Why prefetching did not act when the script sharded fewer than two blocks.
ONE_BLOCK = "the script sharded fewer than two blocks with fully_shard: none to prefetch"
#: Why the unit of wrapping did not act where the script shards its blocks itself.
PER_BLOCK = (
    "the script already shards modules inside the root before it: its unit of wrapping is "
    "its own, per block"
)
#: Why the unit of wrapping did not act at a call that shards several modules as one unit.
GROUPED = "the script shards a list of modules in one fully_shard call: its own unit of wrapping"
#: Why the unit of wrapping did not act on a module with nothing repeated to shard apart.
NO_BLOCKS = (
    "{} sharded by fully_shard has no repeated blocks (a ModuleList or Sequential of two or "
    "more modules of one class) to shard apart"
)


def fully_shard_homes() -> list[ModuleType]:
    """The modules a script imports `fully_shard` from, patched here."""
    import torch.distributed.fsdp as public
    import torch.distributed.fsdp._fully_shard as package

    return [public, package]


class FSDPInjector:
    def __init__(self, values: dict[str, KnobValue], ledger: Ledger) -> None:
        self.ledger = ledger
        #: knob -> (its part, the value)
        self.keywords: dict[str, tuple[FSDPArgument, KnobValue]] = {}
        #: knob -> prefetch depth
        self.prefetch: dict[str, int] = {}
        #: knob -> (its part, the value), for the unit of wrapping
        self.units: dict[str, tuple[FSDPArgument, KnobValue]] = {}
        for knob, value in values.items():
            part = get_knob(knob).applies_to
            assert isinstance(part, FSDPArgument)  # the catalogue test holds it to that
            if part.units is not None:
                ledger.expect(knob, value, NO_FULLY_SHARD)
                self.units[knob] = (part, value)
            elif part.prefetch is not None:
                ledger.expect(knob, value, ONE_BLOCK)
                self.prefetch[knob] = part.prefetch(value)
            else:
                ledger.expect(knob, value, NO_FULLY_SHARD)
                self.keywords[knob] = (part, value)
        #: every module sharded so far, and the blocks among them in the order they were
        self.sharded: list[Any] = []
        self.blocks: list[Any] = []

    def install(self, site: InjectSite) -> None:
        homes = fully_shard_homes()
        wrapper = self._wrap(homes[0].fully_shard)
        for home in homes:
            site.patcher.set(home, "fully_shard", wrapper)

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        # wraps: `fully_shard.state(module)` and the docstring stay the original's
        @functools.wraps(original)
        def fully_shard(module: Any, *args: Any, **kwargs: Any) -> Any:
            at = user_site(2)
            for unit in self._units(module, at):
                bound = signature.bind(module, *args, **kwargs)
                bound.arguments[first] = unit
                self._shard(original, signature, bound, at)
            return self._shard(original, signature, signature.bind(module, *args, **kwargs), at)

        first = next(iter(signature.parameters))
        return fully_shard

    def _shard(
        self,
        original: Callable[..., Any],
        signature: inspect.Signature,
        bound: inspect.BoundArguments,
        at: str | None,
    ) -> Any:
        """One `fully_shard` call with the recipe's keywords put in."""
        module = next(iter(bound.arguments.values()))
        modules = list(module) if isinstance(module, list | tuple) else [module]
        block = not self._holds_sharded(modules)
        acted = self._keywords(bound, signature, block)
        result = original(*bound.args, **bound.kwargs)
        self.sharded.extend(modules)
        for knob, what in acted:
            self.ledger.applied(knob, where(at, f"fully_shard({what})"))
        if block:
            self.blocks.append(modules[0])
            self._prefetch(at)
        return result

    def _holds_sharded(self, modules: list[Any]) -> bool:
        inside = {id(m) for top in modules for m in top.modules()}
        return any(id(m) in inside for m in self.sharded)

    def _units(self, module: Any, at: str | None) -> list[Any]:
        """The blocks the unit-of-wrapping knob shards before `module` (the module's
        `fully_shard` call follows, now over them); [] where it does not act."""
        if not self.units:
            return []
        if isinstance(module, list | tuple):
            for knob in self.units:
                self.ledger.unreached(knob, GROUPED)
            return []
        if self._holds_sharded([module]):
            for knob in self.units:
                self.ledger.skipped(knob, PER_BLOCK)
            return []
        for knob, (part, value) in self.units.items():
            assert part.units is not None
            units = part.units(value, module)
            if not units:
                self.ledger.unreached(knob, NO_BLOCKS.format(type(module).__name__))
                continue
            what = f"{_held_as(module, units[0])}[i]) for {len(units)} "
            what += f"{type(units[0]).__name__} blocks, before the root's"
            self.ledger.applied(knob, where(at, f"fully_shard({what}"))
            return list(units)
        return []

    def _keywords(
        self, bound: inspect.BoundArguments, signature: inspect.Signature, block: bool
    ) -> list[tuple[str, str]]:
        """Put the recipe's keywords into one call's arguments; what acted, as recorded."""
        acted = []
        for knob, (part, value) in self.keywords.items():
            if part.blocks_only and not block:
                continue  # the root's setting stays FSDP's (module docstring)
            if part.for_world is not None:
                reason = part.for_world(value, _shard_ranks(bound.arguments.get("mesh")))
                if reason is not None:
                    self.ledger.skipped(knob, reason)
                    continue
            assert part.keywords is not None
            for keyword, wanted in part.keywords(value).items():
                own = bound.arguments.get(keyword, signature.parameters[keyword].default)
                if own is None and block and part.block_default is not None:
                    own = part.block_default  # FSDP's own for a block
                if own == wanted:
                    self.ledger.skipped(
                        knob, f"the script's fully_shard {ALREADY_RUNS_WITH} {keyword}={own!r}"
                    )
                    continue
                bound.arguments[keyword] = wanted
                acted.append((knob, f"{keyword}={show_value(value)} (was {_shown(own)})"))
        return acted

    def _prefetch(self, at: str | None) -> None:
        """Explicit prefetching over the blocks sharded so far (set anew at each block: each
        call replaces a block's list)."""
        for knob, depth in self.prefetch.items():
            blocks = self.blocks
            if len(blocks) < 2:
                continue
            for i, block in enumerate(blocks):
                block.set_modules_to_forward_prefetch(blocks[i + 1 : i + 1 + depth])
                block.set_modules_to_backward_prefetch(blocks[max(0, i - depth) : i][::-1])
            self.ledger.applied(knob, where(at, f"prefetch {depth} blocks ahead of this block"))


def _held_as(root: Any, block: Any) -> str:
    """The name of the container that holds `block` inside `root` ("model.layers")."""
    for name, container in root.named_modules():
        if any(child is block for child in container.children()):
            return f"model.{name}" if name else "model"
    return "model"


def _shard_ranks(mesh: Any) -> int:
    """The ranks a call's parameters are sharded over: its mesh's last dimension (HSDP
    replicates over the first), or the whole job's (`fully_shard`'s default mesh)."""
    if mesh is not None:
        return int(mesh.size(mesh.ndim - 1))
    import torch.distributed as dist

    return int(dist.get_world_size())


def _shown(value: Any) -> str:
    """A policy by its class name and fields (dataclass repr), a plain value as the record
    shows values."""
    return repr(value) if hasattr(value, "__dataclass_fields__") else show_value(value)
