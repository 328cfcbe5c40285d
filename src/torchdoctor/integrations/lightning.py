"""`TorchDoctorCallback`: record a Lightning `Trainer.fit` with the launcher's probes and leave a
run folder that `torchdoctor report` renders and `torchdoctor diff` compares.

    trainer = Trainer(callbacks=[TorchDoctorCallback(out="runs/today")])
    trainer.fit(model, loader)

Works with `lightning` (`lightning.pytorch`) and with `pytorch_lightning`, whichever is
installed (`lightning` first): a Trainer accepts only callbacks of its own package's class. The
probes go in when training starts (after the sanity check, so its validation steps are not
training steps) and come out when it ends or fails; under distributed training only global
rank 0 records.
"""

from __future__ import annotations

import importlib
from typing import Any

from torchdoctor.core.errors import CollectError
from torchdoctor.integrations.recording import RecordingCallback


def _lightning() -> Any:
    for name in ("lightning.pytorch", "pytorch_lightning"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise CollectError(
        "TorchDoctorCallback needs Lightning",
        hint="pip install 'torchdoctor[lightning]' (or install lightning)",
    )


_Callback: Any = _lightning().Callback


class TorchDoctorCallback(RecordingCallback, _Callback):
    """Steps, phases and a diagnosis of `Trainer.fit`; the run folder is `run_dir` afterwards.

    `TorchDoctorCallback(out=None, *, warmup=5, profile_steps=5, report=True)`: the options of
    `integrations.recording.Recording`.
    """

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if getattr(trainer, "global_rank", 0) != 0:
            return
        self.start_recording(type(pl_module).__name__)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.finish_recording()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        if self.recording is not None and self.recording.active:
            self.recording.finish(exception)
