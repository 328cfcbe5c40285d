"""Knobs injected into an unmodified script at launch: one injector per site a knob names
(`Script.site`).

`Injection` (coordinator.py) composes them, as `Instrumentation` composes the probes, and
installs them through one reversible site:
- `dataloading.DataLoaderInjector`: DataLoader keyword arguments at construction;
- `threads.ThreadsInjector`: torch.set_num_threads at start (and kept there);
- `optimizer.OptimizerInjector`: foreach/fused at optimizer construction, zero_grad's
  set_to_none;
- `model.ModelInjector`: finds the trained top-level module (the first outermost module
  called with grad enabled in training mode that owns an optimizer's parameters) at its
  first call and applies each model knob's own part to it before that call runs
  (`knobs/script_model.py`: checkpointing, channels_last, torch.compile, autocast, fp16's
  GradScaler);
- `ddp.DDPInjector`: DistributedDataParallel's keywords and comm hook at construction;
- `process.ProcessInjector`: any other `ProcessSetting` (cudnn.benchmark and TF32, CUDA only).
What each knob did is an `InjectionRecord` (record.py, torch-free), written by a launch to
`injection[.rank<N>].json` in its out dir. Names load on first use, so reading a record
does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from torchdoctor.collect.inject.coordinator import Injection, injection_path, install_recipe
    from torchdoctor.collect.inject.record import InjectionRecord, KnobOutcome, ScriptRun

_EXPORTS = {
    "Injection": "torchdoctor.collect.inject.coordinator",
    "install_recipe": "torchdoctor.collect.inject.coordinator",
    "injection_path": "torchdoctor.collect.inject.coordinator",
    "InjectionRecord": "torchdoctor.collect.inject.record",
    "KnobOutcome": "torchdoctor.collect.inject.record",
    "ScriptRun": "torchdoctor.collect.inject.record",
}

__all__ = [
    "Injection",
    "InjectionRecord",
    "KnobOutcome",
    "ScriptRun",
    "injection_path",
    "install_recipe",
]

__getattr__ = lazy_getattr(__name__, _EXPORTS)
