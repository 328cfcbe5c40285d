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

from typing import Any

from torchdoctor.core.errors import CollectError
from torchdoctor.integrations.recording import RecordingCallback

try:
    from transformers import TrainerCallback
except ImportError:
    raise CollectError(
        "TorchDoctorTrainerCallback needs transformers",
        hint="pip install 'torchdoctor[transformers]'",
    ) from None


class TorchDoctorTrainerCallback(RecordingCallback, TrainerCallback):
    """Steps, phases and a diagnosis of `Trainer.train`; the run folder is `run_dir` after it.

    `TorchDoctorTrainerCallback(out=None, *, warmup=5, profile_steps=5, report=True)`: the
    options of `integrations.recording.Recording`.
    """

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not getattr(state, "is_world_process_zero", True):
            return
        model = kwargs.get("model")
        self.start_recording(type(model).__name__ if model is not None else "trainer")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.finish_recording()
