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
from pathlib import Path
from typing import Any

from torchdoctor.core.errors import CollectError
from torchdoctor.integrations.recording import (
    DEFAULT_PROFILE_STEPS,
    DEFAULT_WARMUP,
    Recording,
    RecordingOptions,
)


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


class TorchDoctorCallback(_Callback):
    """Steps, phases and a diagnosis of `Trainer.fit`; the run folder is `run_dir` afterwards."""

    def __init__(
        self,
        out: str | Path | None = None,
        *,
        warmup: int = DEFAULT_WARMUP,
        profile_steps: int = DEFAULT_PROFILE_STEPS,
        report: bool = True,
    ) -> None:
        super().__init__()
        self._options = RecordingOptions(out, warmup, profile_steps, report)
        self.recording: Recording | None = None

    @property
    def run_dir(self) -> Path | None:
        return self.recording.run_dir if self.recording is not None else None

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if getattr(trainer, "global_rank", 0) != 0:
            return
        self.recording = self._options.recording(type(pl_module).__name__)
        self.recording.start()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.recording is not None:
            self.recording.finish()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        if self.recording is not None and self.recording.active:
            self.recording.finish(exception)
