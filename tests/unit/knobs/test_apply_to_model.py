"""A recipe applies to a plain model with no training around it (`apply_to_model`), as an
inference session will use it: the model a `ModelSpec` builds, the knobs of each stage."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchdoctor.core.errors import KnobNotApplicable
from torchdoctor.knobs import CALLED, RAW, ModelContext, Recipe, apply_to_model
from torchdoctor.workloads import ModelSpec, Workload, example_inputs, get_workload


def _spec() -> ModelSpec:
    return get_workload("cnn", width=16, images=16, decode_cost_us=0, batch_size=4)


def test_a_model_spec_is_the_model_half_of_a_workload() -> None:
    spec = _spec()
    assert isinstance(spec, ModelSpec) and isinstance(spec, Workload)
    assert example_inputs(spec, 2).shape == (2, *spec.input_shapes["image"])


def test_the_recipe_applies_to_a_plain_model() -> None:
    spec = _spec()
    model = spec.build_model()
    settings = Recipe({"channels_last": True, "compile": "default"}).resolved("cpu")
    ctx = ModelContext(device_type="cpu", settings=settings)
    raw = apply_to_model(model, ctx, RAW)
    conv = next(m for m in raw.modules() if isinstance(m, nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    called = apply_to_model(raw, ctx, CALLED)
    assert isinstance(called, torch._dynamo.eval_frame.OptimizedModule)  # compiled lazily
    assert ctx.raw is raw and called._orig_mod is raw  # type: ignore[union-attr]
    plain = apply_to_model(spec.build_model(), ModelContext("cpu", Recipe().resolved()), CALLED)
    assert not isinstance(plain, torch._dynamo.eval_frame.OptimizedModule)


def test_a_transform_refuses_a_model_it_would_mistrain() -> None:
    narrow = nn.Sequential(nn.Conv2d(4, 8, 1, stride=2))  # oneDNN issue #6035 on a CPU
    ctx = ModelContext("cpu", Recipe({"channels_last": True}).resolved())
    with pytest.raises(KnobNotApplicable, match="oneDNN issue #6035"):
        apply_to_model(narrow, ctx, RAW)
