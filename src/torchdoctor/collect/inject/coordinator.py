"""`Injection`: a recipe's knobs injected into the running process, one injector per site.

Built from a knob -> value dict (`Recipe.to_dict()`, a tuner's best recipe), it decides per
knob whether it can act here at all (the catalogue's applicability rules on this process's
device; a few knobs that need the script's own code changed are never injected), installs
the injectors through one `InjectSite` (so `uninstall` restores every patched attribute and
setting), and records what each knob did in an `InjectionRecord`. Which injector takes a knob
is the knob's own `Script.site`, so the fan-out names no knob.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from torchdoctor.collect.inject.base import Injector, InjectSite, KnobValue, Ledger
from torchdoctor.collect.inject.dataloading import DataLoaderInjector
from torchdoctor.collect.inject.ddp import DDPInjector
from torchdoctor.collect.inject.fsdp import FSDPInjector
from torchdoctor.collect.inject.optimizer import OptimizerInjector
from torchdoctor.collect.inject.process import ProcessInjector
from torchdoctor.collect.inject.record import INJECTION_STEM, InjectionRecord
from torchdoctor.collect.inject.threads import ThreadsInjector
from torchdoctor.collect.inject.trained_model import (
    GradScalerFactory,
    ModelInjector,
    _default_scaler,
)
from torchdoctor.core.errors import KnobNotApplicable
from torchdoctor.core.rank import RankIdentity
from torchdoctor.knobs import (
    ApplicabilityContext,
    Recipe,
    ScriptSite,
    catalogue,
    cuda_capability_of,
    get_knob,
    not_injectable,
)

#: Knobs that need the script's own code changed, with why they are never injected: the
#: built-in catalogue's (`knobs.not_injectable()` reads the live one).
NOT_INJECTABLE: dict[str, str] = not_injectable()


#: The injector of each site but the model's (built with the injection's own options), which
#: the catalogue's knobs name (`Script.site`); installed in `ScriptSite`'s order.
SITE_INJECTORS: dict[ScriptSite, Callable[[dict[str, KnobValue], Ledger], Injector]] = {
    ScriptSite.THREADS: ThreadsInjector,
    ScriptSite.LOADER: DataLoaderInjector,
    ScriptSite.OPTIMIZER: OptimizerInjector,
    ScriptSite.DDP: DDPInjector,
    ScriptSite.FSDP: FSDPInjector,
    ScriptSite.PROCESS: ProcessInjector,
}


def injection_path(out_dir: str | Path) -> Path:
    return Path(out_dir) / f"{INJECTION_STEM}{RankIdentity.from_env().suffix}.json"


class Injection:
    """The injectors of one recipe in this process. `install()` / `uninstall()`, `record()`."""

    def __init__(
        self,
        recipe: Mapping[str, KnobValue],
        *,
        device: str | None = None,
        grad_scaler: GradScalerFactory = _default_scaler,
        compile_backend: str | None = None,
        perturbation: int = 0,
    ) -> None:
        self.recipe = Recipe.from_dict(recipe)  # KnobError for an unknown knob or a bad value
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.ledger = Ledger()
        self.site = InjectSite()
        self._installed = False
        families = self._sort(self.recipe)
        ledger = self.ledger
        self.model: ModelInjector | None = None
        injectors: list[Injector] = []
        for site in ScriptSite:
            values = families.get(site, {})
            if site is ScriptSite.MODEL:
                if values or perturbation > 0:
                    # A perturbation (a tuner's quality-reference run) acts on the trained
                    # model too, so the model is looked for even when no model knob is set.
                    self.model = ModelInjector(
                        values,
                        ledger,
                        grad_scaler=grad_scaler,
                        compile_backend=compile_backend,
                        perturbation=perturbation,
                    )
                    injectors.append(self.model)
            elif values:
                injectors.append(SITE_INJECTORS[site](values, ledger))
        self.injectors = tuple(injectors)

    def _sort(self, recipe: Recipe) -> dict[ScriptSite, dict[str, KnobValue]]:
        """Each knob that can act here, under its site; the others ledgered."""
        ctx = ApplicabilityContext(
            device=self.device,
            settings=recipe.resolved(self.device),
            cuda_capability=cuda_capability_of(self.device),
        )
        families: dict[ScriptSite, dict[str, KnobValue]] = {}
        for name, value in recipe.items():
            script = get_knob(name).script
            assert script is not None  # the catalogue test holds every knob to it
            if script.not_injectable is not None:
                self.ledger.refuse(name, value, script.not_injectable)
                continue
            if value is None or value in script.unchanged:
                self.ledger.unchanged(name, value)
                continue
            # A knob checked per DataLoader: the script's loader may have workers of its own.
            reason = None if script.per_loader else _not_applicable(name, value, ctx)
            if reason is not None:
                self.ledger.refuse(name, value, reason)
                continue
            assert script.site is not None
            families.setdefault(script.site, {})[name] = value
        return families

    # ---- lifecycle -------------------------------------------------------------------------

    def install(self) -> Injection:
        """Install every injector (after any instrumentation, so theirs wrap its hooks)."""
        if not self._installed:
            self._installed = True
            for injector in self.injectors:
                injector.install(self.site)
        return self

    def uninstall(self) -> None:
        """Put back every patched attribute and setting (the model's memory format stays)."""
        if self._installed:
            self._installed = False
            self.site.remove()

    def __enter__(self) -> Injection:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    # ---- record ----------------------------------------------------------------------------

    def record(self) -> InjectionRecord:
        model = self.model.model if self.model is not None else None
        return InjectionRecord(
            recipe=self.recipe.to_dict(),
            knobs=self.ledger.outcomes([k.name for k in catalogue()]),
            model=type(model).__name__ if model is not None else None,
            device_type=self.model.device_type if self.model is not None else None,
        )

    def write(self, out_dir: str | Path) -> Path:
        path = injection_path(out_dir)
        self.record().write(path)
        return path


def install_recipe(recipe: Mapping[str, Any], *, device: str | None = None) -> Injection:
    """Inject `recipe` (knob -> value, as `Recipe.to_dict()` gives) into this process from now
    on; returns the installed `Injection` (`uninstall()`, `record()`, `write(out_dir)`).

    Call it before the script builds its DataLoaders, optimizers and model (a launch does,
    before runpy). Raises KnobError for an unknown knob or a value outside its domain.
    """
    return Injection(recipe, device=device).install()


def _not_applicable(name: str, value: KnobValue, ctx: ApplicabilityContext) -> str | None:
    try:
        get_knob(name).check_applicable(value, ctx)
    except KnobNotApplicable as exc:
        return exc.reason
    return None
