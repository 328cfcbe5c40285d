"""A tiny Hugging Face Trainer job (a BERT built from a config, nothing downloaded) whose
dataset waits on storage (a planted data wait), for the callback's study: `torchdoctor
diagnose -- python` of this script and the callback inside it must agree. With
TORCHDOCTOR_CALLBACK_OUT set the script records itself with `TorchDoctorTrainerCallback`."""

from __future__ import annotations

import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

#: Per item (8 a batch): the tiny model's step is about ten milliseconds on a quiet 2-core
#: host, the Trainer's own work included, so the wait is most of the step there.
READ_S = 0.02
STEPS = 20
SEQ = 16


class Items(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        time.sleep(READ_S)
        g = torch.Generator().manual_seed(index)
        return {
            "input_ids": torch.randint(0, 64, (SEQ,), generator=g),
            "labels": torch.randint(0, 2, (), generator=g),
        }


def main() -> int:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=SEQ,
        num_labels=2,
    )
    callbacks = []
    out = os.environ.get("TORCHDOCTOR_CALLBACK_OUT")
    if out:
        from torchdoctor.integrations import TorchDoctorTrainerCallback

        callbacks.append(TorchDoctorTrainerCallback(out=out, report=False))
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(
            output_dir=tmp,
            max_steps=STEPS,
            per_device_train_batch_size=8,
            learning_rate=1e-3,
            report_to=[],
            save_strategy="no",
            logging_strategy="no",
            use_cpu=True,
            dataloader_num_workers=0,
            disable_tqdm=True,
        )
        trainer = Trainer(
            model=BertForSequenceClassification(config),
            args=args,
            train_dataset=Items(),
            callbacks=callbacks,
        )
        trainer.train()
    return 0


if __name__ == "__main__":
    sys.exit(main())
