"""A tiny Lightning job whose loader waits on storage (a planted data wait), for the callback's
study: `torchdoctor diagnose -- python` of this script and the callback inside it must agree.
With TORCHDOCTOR_CALLBACK_OUT set the script records itself with `TorchDoctorCallback`."""

from __future__ import annotations

import os
import sys
import time

import torch

try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl

#: Per item: the step's compute is a fraction of a millisecond, so the wait dominates.
READ_S = 0.01
STEPS = 20


class Items(torch.utils.data.Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(READ_S)
        g = torch.Generator().manual_seed(index)
        return torch.randn(16, generator=g), torch.randn(1, generator=g)


class Regressor(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)
        )

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> int:
    torch.manual_seed(0)
    callbacks = []
    out = os.environ.get("TORCHDOCTOR_CALLBACK_OUT")
    if out:
        from torchdoctor.integrations import TorchDoctorCallback

        callbacks.append(TorchDoctorCallback(out=out, report=False))
    trainer = pl.Trainer(
        max_steps=STEPS,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=callbacks,
    )
    loader = torch.utils.data.DataLoader(Items(), batch_size=8, num_workers=0)
    trainer.fit(Regressor(), loader)
    return 0


if __name__ == "__main__":
    sys.exit(main())
