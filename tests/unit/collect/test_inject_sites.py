"""Model knobs record the model's first training call as `file:line`, which tune/patch.py
traces back to the line that builds the model."""

from __future__ import annotations

import inspect

import torch
from torch import nn

from torchdoctor.collect.inject import Injection


def test_compile_records_the_models_first_call_site() -> None:
    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with Injection({"compile": "default"}, compile_backend="eager") as inj:
        torch.optim.SGD(model.parameters(), lr=0.1)
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        model(torch.randn(3, 4)).sum().backward()
    outcome = inj.record().outcome("compile")
    assert outcome is not None and outcome.status == "applied"
    assert outcome.applied_at[0].endswith(f" at {__file__}:{line}")
    torch._dynamo.reset()


def test_injected_cudnn_benchmark_leaves_the_scripts_matmul_precision() -> None:
    from torchdoctor.collect.inject.base import InjectSite, Ledger
    from torchdoctor.collect.inject.process import ProcessInjector

    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark)
    torch.set_float32_matmul_precision("medium")  # the script's own choice
    try:
        ledger, site = Ledger(), InjectSite()
        ProcessInjector({"cudnn_benchmark": True}, ledger).install(site)
        assert torch.backends.cudnn.benchmark is True
        assert torch.get_float32_matmul_precision() == "medium"
        assert ledger.active("cudnn_benchmark")
        site.remove()
        assert torch.backends.cudnn.benchmark is before[1]
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cudnn.benchmark = before[1]
