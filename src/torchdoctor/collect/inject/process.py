"""Process-wide settings a knob declares as a `ProcessSetting` at `ScriptSite.PROCESS` (CUDA
backend flags, ...): applied before the script starts, undone at uninstall; each sets its own
flag and no other.

The engine session applies the same `ProcessSetting.apply` when it starts, so a knob of this
kind is injected into scripts with no code here.
"""

from __future__ import annotations

from torchdoctor.collect.inject.base import InjectSite, KnobValue, Ledger
from torchdoctor.knobs import ProcessSetting, get_knob, show_value


class ProcessInjector:
    def __init__(self, values: dict[str, KnobValue], ledger: Ledger) -> None:
        self.values = values
        self.ledger = ledger
        for knob, value in values.items():
            ledger.expect(knob, value, "the setting was not applied")

    def install(self, site: InjectSite) -> None:
        for name, value in self.values.items():
            part = get_knob(name).applies_to
            assert isinstance(part, ProcessSetting)  # the catalogue test holds it to that
            site.undo.append(part.apply(value))
            self.ledger.applied(name, part.shown or f"{name}={show_value(value)} at start")
