"""The `gpt` workload's hand-written attention computes what its SDPA attention computes."""

from __future__ import annotations

import pytest
import torch

from torchdoctor.core.errors import WorkloadError
from torchdoctor.workloads import get_workload


def test_manual_attention_matches_sdpa() -> None:
    small = {"block": 16, "layers": 1, "heads": 2, "embd": 16, "characters": 512}
    outputs = []
    for attention in ("sdpa", "manual"):
        torch.manual_seed(0)
        wl = get_workload("gpt", attention=attention, **small)
        assert wl.params["attention"] == attention
        model = wl.build_model().eval()
        with torch.no_grad():
            outputs.append(model(wl.example_inputs(2)))
    torch.testing.assert_close(outputs[0], outputs[1], rtol=1e-4, atol=1e-5)


def test_unknown_attention_is_a_workload_error() -> None:
    with pytest.raises(WorkloadError, match="attention"):
        get_workload("gpt", attention="flash")
