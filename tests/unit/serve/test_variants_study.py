"""The compiling variants on a tiny model, for real: torch.compile (default and freezing),
torch.export and TorchScript. A study: compilation takes seconds to tens of seconds here."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchdoctor.serve.variants import prepare_variant

#: Compilations of minutes; the gate compares outputs, never timings.
pytestmark = [pytest.mark.study, pytest.mark.untimed]


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


@pytest.mark.parametrize("name", ["compile", "compile_freezing", "export", "torchscript"])
def test_a_compiled_variant_passes_the_fp32_gate_and_serves_another_batch(name: str) -> None:
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    prepared = prepare_variant(name, _mlp(), x, device="cpu")
    assert prepared.accuracy.passed, prepared.accuracy
    assert prepared.setup_s > 0
    other = torch.randn(3, 16, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = _mlp().eval()(other)
    # A batcher sends other batch sizes: the variant serves them (export's batch is dynamic).
    assert torch.allclose(prepared.call(other), expected, atol=1e-4, rtol=1e-4)
