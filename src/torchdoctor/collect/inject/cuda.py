"""cudnn.benchmark and TF32: process-wide flags set before the script starts (CUDA only;
on another device the catalogue's applicability check refuses them before they get here)."""

from __future__ import annotations

from torchdoctor.collect.inject.base import InjectSite, KnobValue, Ledger
from torchdoctor.knobs import apply_cuda_flags, restore_cuda_flags


class CudaFlagsInjector:
    def __init__(self, values: dict[str, KnobValue], ledger: Ledger) -> None:
        self.values = values
        self.ledger = ledger
        for knob, value in values.items():
            ledger.expect(knob, value, "the flag was not set")

    def install(self, site: InjectSite) -> None:
        benchmark = bool(self.values.get("cudnn_benchmark", False))
        tf32 = bool(self.values.get("tf32", False))
        previous = apply_cuda_flags(cudnn_benchmark=benchmark, tf32=tf32)
        site.undo.append(lambda: restore_cuda_flags(previous))
        if "cudnn_benchmark" in self.values:
            self.ledger.applied("cudnn_benchmark", "torch.backends.cudnn.benchmark = True at start")
        if "tf32" in self.values:
            self.ledger.applied(
                "tf32",
                'torch.set_float32_matmul_precision("high"), cudnn.allow_tf32 = True at start',
            )
