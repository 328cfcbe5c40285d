"""torch.compile really compiles (kept to one tiny model: compiling costs seconds)."""

from __future__ import annotations

import torch
from torch._dynamo.eval_frame import OptimizedModule
from torch._dynamo.utils import counters

from torchdoctor.engine import prepare
from torchdoctor.knobs import Recipe
from torchdoctor.workloads import get_workload


def test_compile_default_compiles_the_model_into_graphs() -> None:
    torch._dynamo.reset()
    counters.clear()
    wl = get_workload("mlp", features=8, hidden=16, layers=1, rows=128, batch_size=16)
    with prepare(wl, Recipe.parse(["compile=default"]), device="cpu") as s:
        assert isinstance(s.model, OptimizedModule) and s.compiled
        s.run_steps(2, measure_phases=False)
    assert counters["stats"]["unique_graphs"] >= 1
