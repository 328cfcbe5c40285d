"""Stage: integrations. torchdoctor where people already train: callbacks for the Lightning
and Hugging Face trainers; its results as TensorBoard, Weights & Biases or MLflow metrics.

- `TorchDoctorCallback` (integrations/lightning.py): `Trainer(callbacks=[TorchDoctorCallback()])`
  of `lightning` or `pytorch_lightning`;
- `TorchDoctorTrainerCallback` (integrations/transformers.py): `transformers.Trainer(...,
  callbacks=[TorchDoctorTrainerCallback()])`;
- `Recording` (integrations/recording.py): what both do, for any other loop: the zero-code
  launcher's probes installed in this process from the first training step to the last, then a
  run folder (profile, trace, analysis, diagnosis, report) as `torchdoctor diagnose -- python`
  leaves;
- `write_scalars(source, log_dir)` (integrations/tensorboard.py), `log_to_wandb(source)`
  (integrations/wandb.py) and `log_to_mlflow(source)` (integrations/mlflow.py): a run, tuning
  result, serving result, diagnosis or run folder as TensorBoard scalars, Weights & Biases
  metrics or MLflow metrics, each read from one list of what a record contributes
  (integrations/scalars.py).

A stage of its own, after report: a callback records (collect), diagnoses (diagnose) and
renders (report) in the user's own process, which no stage to their left may do. The trainers'
libraries are optional extras (`pip install torchdoctor[lightning]`, `[transformers]`,
`[tensorboard]`, `[wandb]`, `[mlflow]`) and are imported only by the module that uses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from torchdoctor.integrations.lightning import TorchDoctorCallback
    from torchdoctor.integrations.mlflow import log_to_mlflow
    from torchdoctor.integrations.recording import Recording
    from torchdoctor.integrations.tensorboard import write_scalars
    from torchdoctor.integrations.transformers import TorchDoctorTrainerCallback
    from torchdoctor.integrations.wandb import log_to_wandb

_LAZY_EXPORTS = {
    "Recording": "torchdoctor.integrations.recording",
    "TorchDoctorCallback": "torchdoctor.integrations.lightning",
    "TorchDoctorTrainerCallback": "torchdoctor.integrations.transformers",
    "log_to_mlflow": "torchdoctor.integrations.mlflow",
    "log_to_wandb": "torchdoctor.integrations.wandb",
    "write_scalars": "torchdoctor.integrations.tensorboard",
}

__all__ = [
    "Recording",
    "TorchDoctorCallback",
    "TorchDoctorTrainerCallback",
    "log_to_mlflow",
    "log_to_wandb",
    "write_scalars",
]

__getattr__ = lazy_getattr(__name__, _LAZY_EXPORTS)
