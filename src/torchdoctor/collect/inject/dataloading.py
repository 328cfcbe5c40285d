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
from torchdoctor.collect.inject.base import InjectSite, KnobValue, Ledger, where
from torchdoctor.knobs import BATCH_SIZE, loader_arguments, show_value

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

        def setting(knob: str, keyword: str, value: Any) -> None:
            old = arguments.get(keyword, _DEFAULTS.get(keyword))
            arguments[keyword] = value
            ledger.applied(
                knob, where(site, f"DataLoader {keyword} {show_value(old)} -> {show_value(value)}")
            )

        # In the order the knobs declare (`LoaderArgument.order`): the worker count is set
        # before the settings that need workers read it.
        for name, part in loader_arguments():
            if name not in values:
                continue
            if part.needs_workers and int(arguments.get("num_workers", 0) or 0) <= 0:
                ledger.skipped(
                    name, where(site, "a DataLoader runs without worker processes (num_workers=0)")
                )
            elif name == BATCH_SIZE.name and arguments.get("batch_sampler") is not None:
                ledger.skipped(
                    name,
                    where(site, "a DataLoader takes a batch_sampler, which sets its batches"),
                )
            elif name == BATCH_SIZE.name and arguments.get("batch_size", 1) is None:
                ledger.skipped(
                    name, where(site, "a DataLoader is built with batch_size=None (no batching)")
                )
            else:
                setting(name, part.keyword, values[name])


#: DataLoader's own defaults, to show what a setting replaced when the script left it out.
_DEFAULTS: dict[str, Any] = {
    name: p.default
    for name, p in inspect.signature(dl_mod.DataLoader.__init__).parameters.items()
    if p.default is not inspect.Parameter.empty
}
