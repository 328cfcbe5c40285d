"""`gpt` with its attention written by hand, on a context long enough that the scores rule.

`attention="manual"` is nanoGPT's slow path (matmul, mask, softmax, matmul): each layer keeps
the (batch, heads, T, T) softmax for backward and makes as large a tensor at each of its
steps. At T = 256 with 8 heads those are 2 MiB per sample and layer, against 64 KiB for each
of the layer's (T, 64) activations, so switching to SDPA (the `attention` knob) lowers the
worker's resident peak by about 15% at a batch of 8 (a median chunk peak of 477 MiB to 404
MiB measured here, one layer, one thread): the memory ladder's study
(`tests/integration/test_tune_fit.py`) sees that step fit alone. Python-level `tune` takes no
workload parameters, so the study names this file (`manual_gpt.py:make`).
"""

from __future__ import annotations

from typing import Any

from torchdoctor.workloads.gpt import GptWorkload


def make(**params: Any) -> GptWorkload:
    shape = {"block": 256, "layers": 1, "heads": 8, "embd": 64, "characters": 16384}
    return GptWorkload(**{**shape, "attention": "manual", "batch_size": 8, **params})
