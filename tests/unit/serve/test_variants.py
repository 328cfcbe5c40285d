"""Inference variants on tiny models: the accuracy gate, the per-module fallback, what does not
apply, and that the caller's model is left as it was. Compilers are in test_variants_study."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from torchdoctor.knobs import ApplicabilityContext
from torchdoctor.serve import variants
from torchdoctor.serve.variants import (
    VARIANTS,
    VariantError,
    VariantSetup,
    VariantUnavailable,
    prepare_variant,
)


def _mlp(dropout: float = 0.0) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(dropout), nn.Linear(32, 4))


def _x() -> torch.Tensor:
    return torch.randn(8, 16, generator=torch.Generator().manual_seed(1))


class Offset(nn.Module):
    """(x + 1024) - 1024: exact in fp32 for |x| ~ 1, but bf16's 8 significant bits round
    x + 1024 to a multiple of 8, which wipes x out."""

    def __init__(self) -> None:
        super().__init__()
        self.shift = nn.Parameter(torch.tensor(1024.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x + self.shift) - self.shift


class Amplify(nn.Module):
    """Multiplies feature 0 by 1e4: an activation outlier, which sets a per-tensor int8 scale
    so coarse that every other feature quantizes to zero in the next layer."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x[:, :1] * 1e4, x[:, 1:]], dim=1)


def test_every_variant_states_its_tolerance_and_where_it_comes_from() -> None:
    for spec in VARIANTS.values():
        assert spec.description and spec.tolerance.source
    assert "deprecated" in VARIANTS["torchscript"].description


def test_eval_matches_fp32_eager_and_its_setup_is_timed_apart() -> None:
    ticks = iter([10.0, 12.5])
    prepared = prepare_variant("eval", _mlp(), _x(), device="cpu", clock=lambda: next(ticks))
    assert prepared.setup_s == 2.5  # the clock read before the build and after the first call
    assert prepared.accuracy.passed and prepared.accuracy.error.max_abs_error == 0.0
    out = prepared.call(_x())
    assert out.shape == (8, 4) and not out.requires_grad


def test_a_model_left_in_train_mode_fails_the_gate_under_no_grad_only() -> None:
    model = _mlp(dropout=0.5).train()
    model[1].eval()  # one submodule held in eval mode, as a frozen batch norm is
    assert not prepare_variant("no_grad", model, _x(), device="cpu").accuracy.passed
    assert not prepare_variant("inference_mode", model, _x(), device="cpu").accuracy.passed
    assert prepare_variant("eval", model, _x(), device="cpu").accuracy.passed
    # The caller's model is left in its modes, module by module.
    assert [m.training for m in model.modules()] == [True, True, False, True, True]


def test_inference_mode_outputs_are_inference_tensors() -> None:
    out = prepare_variant("inference_mode", _mlp().eval(), _x(), device="cpu").call(_x())
    assert out.is_inference()


def test_bf16_fallback_keeps_the_module_that_breaks_the_tolerance_in_fp32() -> None:
    model = nn.Sequential(nn.Linear(4, 4), Offset(), nn.Linear(4, 2))
    before = copy.deepcopy(model.state_dict())
    x = torch.randn(16, 4, generator=torch.Generator().manual_seed(2))
    prepared = prepare_variant("bf16", model, x, device="cpu")
    accuracy = prepared.accuracy
    assert accuracy.fp32_modules == ["1"]
    assert accuracy.passed and accuracy.error_without_fallback is not None
    assert accuracy.error_without_fallback.sqnr_db is not None
    assert accuracy.error_without_fallback.sqnr_db < accuracy.tolerance.min_sqnr_db
    assert prepared.call(x).dtype == torch.bfloat16  # the rest of the model stays in bf16
    # The caller's model keeps its fp32 weights.
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    record = prepared.record()
    assert record.setup_s == prepared.setup_s and record.accuracy == accuracy
    assert VariantSetup.from_json_dict(record.to_json_dict()) == record


def test_int8_fallback_keeps_the_layer_an_activation_outlier_breaks() -> None:
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(8, 8), Amplify(), nn.Linear(8, 4))
    with torch.no_grad():
        model[2].weight[:, 0] = 0.0  # the output does not depend on the outlier itself
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(4))
    accuracy = prepare_variant("int8_dynamic", model, x, device="cpu").accuracy
    assert accuracy.passed and accuracy.fp32_modules == ["2"]


def test_a_lossy_variant_within_its_tolerance_keeps_every_module_reduced() -> None:
    accuracy = prepare_variant("bf16_autocast", _mlp().eval(), _x(), device="cpu").accuracy
    assert accuracy.passed and accuracy.fp32_modules == []
    assert accuracy.error.max_abs_error > 0  # bf16 did change the outputs
    assert accuracy.error_without_fallback is None


def test_channels_last_applies_to_4d_inputs_only() -> None:
    with pytest.raises(VariantUnavailable, match="4-D inputs"):
        prepare_variant("channels_last", _mlp(), _x(), device="cpu")
    torch.manual_seed(5)
    cnn = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    images = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(6))
    prepared = prepare_variant("channels_last", cnn, images, device="cpu")
    assert prepared.accuracy.passed
    assert prepared.call(images).is_contiguous(memory_format=torch.channels_last)


def test_threads_run_at_their_count_and_restore_the_process_count() -> None:
    seen: list[int] = []

    class Probe(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(torch.get_num_threads())
            return x * 2

    before = torch.get_num_threads()  # 1, set by the conftest
    prepared = prepare_variant("threads:2", Probe(), _x(), device="cpu")
    prepared.call(_x())
    assert seen[-1] == 2 and torch.get_num_threads() == before


@pytest.mark.parametrize(
    ("name", "error", "match"),
    [
        ("warp_speed", VariantError, "unknown variant 'warp_speed'"),
        ("threads", VariantError, "unknown variant 'threads'"),
        ("threads:many", VariantError, "whole number"),
        ("threads:0", VariantUnavailable, "invalid value 0"),
    ],
)
def test_bad_variant_names_are_typed_errors(name: str, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        prepare_variant(name, _mlp(), _x(), device="cpu")


def test_bf16_on_a_gpu_without_bf16_units_does_not_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    # The precision knob's own rule decides: a V100 (sm_70) has no bf16 tensor cores.
    v100 = ApplicabilityContext(device="cuda", cuda_capability=(7, 0))
    monkeypatch.setattr(variants, "context_for", lambda workload, device: v100)
    with pytest.raises(VariantUnavailable, match="bf16 needs a GPU with native bfloat16"):
        prepare_variant("bf16_autocast", _mlp(), _x(), device="cuda")


def test_a_variant_that_cannot_build_is_unavailable_with_its_reason() -> None:
    conv = nn.Sequential(nn.Conv2d(3, 4, 3))
    with pytest.raises(VariantUnavailable, match=r"no nn\.Linear layer"):
        prepare_variant("int8_dynamic", conv, torch.randn(1, 3, 8, 8), device="cpu")


def test_a_model_that_fails_in_eval_mode_is_a_variant_error() -> None:
    class TrainOnly(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if not self.training:
                raise RuntimeError("no eval path")
            return x

    with pytest.raises(VariantError, match=r"fails as fp32 eager in eval mode.*no eval path"):
        prepare_variant("eval", TrainOnly(), _x(), device="cpu")
