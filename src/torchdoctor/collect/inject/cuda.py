"""cudnn.benchmark and TF32: process-wide flags set before the script starts (CUDA only;
on another device the catalogue's applicability check refuses them before they get here)."""

from __future__ import annotations

from torchdoctor.collect.inject.base import InjectSite, KnobValue, Ledger
from torchdoctor.knobs import CUDNN_BENCHMARK, TF32, ProcessSetting


class CudaFlagsInjector:
    def __init__(self, values: dict[str, KnobValue], ledger: Ledger) -> None:
        self.values = values
        self.ledger = ledger
        for knob, value in values.items():
            ledger.expect(knob, value, "the flag was not set")

    def install(self, site: InjectSite) -> None:
        # Each knob sets its own flag and no other: a script given cudnn_benchmark alone keeps
        # its own float32 matmul precision (setting "highest" there as well would override the
        # script's choice, and mix the legacy API with the fp32_precision one a script on
        # torch >= 2.9 may use, which torch refuses to read back).
        for knob, what in (
            (CUDNN_BENCHMARK, "torch.backends.cudnn.benchmark = True at start"),
            (TF32, 'torch.set_float32_matmul_precision("high"), cudnn.allow_tf32 = True at start'),
        ):
            if knob.name not in self.values:
                continue
            setting = knob.applies_to
            assert isinstance(setting, ProcessSetting)  # both are process-wide flags
            site.undo.append(setting.apply(self.values[knob.name]))
            self.ledger.applied(knob.name, what)
