"""`TorchDoctorTrainerCallback`: record a Hugging Face `Trainer.train` with the launcher's probes
and leave a run folder that `torchdoctor report` renders and `torchdoctor diff` compares.

    trainer = Trainer(model=model, args=args, train_dataset=data,
                      callbacks=[TorchDoctorTrainerCallback(out="runs/today")])
    trainer.train()

The probes go in at `on_train_begin` and come out at `on_train_end`; the steps are the
optimizer's steps (with gradient accumulation, one step spans its micro-batches). Only the
main process (`state.is_world_process_zero`) records. The Trainer has no callback for a
training that raises: then call `callback.recording.finish(exc)` to remove the probes and
write what was measured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchdoctor.core.errors import CollectError
from torchdoctor.integrations.recording import (
    DEFAULT_PROFILE_STEPS,
    DEFAULT_WARMUP,
    Recording,
    RecordingOptions,
)

try:
    from transformers import TrainerCallback
except ImportError:
    raise CollectError(
        "TorchDoctorTrainerCallback needs transformers",
        hint="pip install 'torchdoctor[transformers]'",
    ) from None


class TorchDoctorTrainerCallback(TrainerCallback):
    """Steps, phases and a diagnosis of `Trainer.train`; the run folder is `run_dir` after it."""

    def __init__(
        self,
        out: str | Path | None = None,
        *,
        warmup: int = DEFAULT_WARMUP,
        profile_steps: int = DEFAULT_PROFILE_STEPS,
        report: bool = True,
    ) -> None:
        self._options = RecordingOptions(out, warmup, profile_steps, report)
        self.recording: Recording | None = None

    @property
    def run_dir(self) -> Path | None:
        return self.recording.run_dir if self.recording is not None else None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not getattr(state, "is_world_process_zero", True):
            return
        model = kwargs.get("model")
        target = type(model).__name__ if model is not None else "trainer"
        self.recording = self._options.recording(target)
        self.recording.start()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.recording is not None:
            self.recording.finish()
