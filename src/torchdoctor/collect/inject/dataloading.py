"""DataLoader keyword arguments set at construction: workers, pinning, prefetch, batch size.

`DataLoader.__init__` is patched on the class, so a DataLoader the script imported by name
(`from torch.utils.data import DataLoader`) and subclasses of it are built with the recipe's
values. prefetch_factor and persistent_workers only exist with worker processes: for a
loader left without workers they are skipped there, with the reason.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch.utils.data.dataloader as dl_mod

from torchdoctor.collect._patching import user_site
from torchdoctor.collect.inject.base import InjectSite, KnobValue, Ledger, describe, where

#: The DataLoader keyword arguments this injector sets, in the order it sets them.
LOADER_KNOBS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "batch_size")
_UNREACHED = "the script built no torch DataLoader"


class DataLoaderInjector:
    def __init__(self, values: dict[str, KnobValue], ledger: Ledger) -> None:
        self.values = values
        self.ledger = ledger
        for knob, value in values.items():
            ledger.expect(knob, value, _UNREACHED)

    def install(self, site: InjectSite) -> None:
        original = dl_mod.DataLoader.__init__
        signature = inspect.signature(original)

        def init(loader: Any, *args: Any, **kwargs: Any) -> None:
            try:
                bound = signature.bind(loader, *args, **kwargs)
            except TypeError:  # let the original raise the script's own error
                return original(loader, *args, **kwargs)
            self._rewrite(bound.arguments, user_site(2))
            return original(*bound.args, **bound.kwargs)

        site.patcher.set(dl_mod.DataLoader, "__init__", init)

    def _rewrite(self, arguments: dict[str, Any], site: str | None) -> None:
        """Set the recipe's values in a DataLoader call's bound arguments (in place)."""
        values, ledger = self.values, self.ledger

        def setting(name: str, value: Any) -> None:
            old = arguments.get(name, _DEFAULTS.get(name))
            arguments[name] = value
            ledger.applied(
                name, where(site, f"DataLoader {name} {describe(old)} -> {describe(value)}")
            )

        if "num_workers" in values:
            setting("num_workers", int(values["num_workers"]))  # type: ignore[arg-type]
        if "pin_memory" in values:
            setting("pin_memory", bool(values["pin_memory"]))
        workers = int(arguments.get("num_workers", 0) or 0)
        for name in ("persistent_workers", "prefetch_factor"):
            if name not in values:
                continue
            if workers <= 0:
                ledger.skipped(
                    name, where(site, "a DataLoader runs without worker processes (num_workers=0)")
                )
                continue
            setting(name, values[name])
        if "batch_size" in values:
            if arguments.get("batch_sampler") is not None:
                ledger.skipped(
                    "batch_size",
                    where(site, "a DataLoader takes a batch_sampler, which sets its batches"),
                )
            elif "batch_size" in arguments and arguments["batch_size"] is None:
                ledger.skipped(
                    "batch_size",
                    where(site, "a DataLoader is built with batch_size=None (no batching)"),
                )
            else:
                setting("batch_size", int(values["batch_size"]))  # type: ignore[arg-type]


#: DataLoader's own defaults, to show what a setting replaced when the script left it out.
_DEFAULTS: dict[str, Any] = {
    name: p.default
    for name, p in inspect.signature(dl_mod.DataLoader.__init__).parameters.items()
    if p.default is not inspect.Parameter.empty
}
