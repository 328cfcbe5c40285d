"""`serve --variants`: each name checked before anything is built, each variant gated on
accuracy before it is timed, and the report's table of setups and gates."""

from __future__ import annotations

import pytest
import torch

from torchdoctor.api.studies import _prepare_variants, serve_options
from torchdoctor.core.errors import TorchDoctorError, UsageError
from torchdoctor.report.adapters.serve import _variant_setup_table
from torchdoctor.serve import InferenceTarget


def _target() -> InferenceTarget:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return InferenceTarget("tiny", model.eval(), torch.randn(3, 8), "cpu")


def _variant_names(text: str | None) -> list[str]:
    """The names `serve --variants TEXT` goes on with (the command splits at commas)."""
    split = text.split(",") if text is not None else None
    return serve_options(None, "binary", "constant", split, 30.0)[1]


def test_variant_names_are_checked_before_anything_is_built() -> None:
    assert _variant_names("inference_mode, threads:2") == ["inference_mode", "threads:2"]
    assert _variant_names(None) == []
    with pytest.raises(TorchDoctorError, match="unknown variant 'nope'") as unknown:
        _variant_names("inference_mode,nope")
    assert unknown.value.exit_code == 2
    with pytest.raises(UsageError, match="twice"):
        _variant_names("eval,eval")


def test_only_variants_that_apply_and_pass_the_gate_are_timed() -> None:
    target = _target()
    calls, setups, notes = _prepare_variants(
        ["inference_mode", "channels_last"], target, lambda _: None
    )
    # channels_last needs 4-D inputs: named with its reason, neither set up nor timed.
    assert list(calls) == ["inference_mode"]
    assert [s.name for s in setups] == ["inference_mode"]
    (note,) = notes
    assert note.startswith("channels_last: not measured, it does not apply here")
    # The bound call serves the example batch cut to one request, as the eager model does.
    out = calls["inference_mode"]()
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == (1, 4)
    assert torch.allclose(out, target.model(target.batch(1)))
    table = _variant_setup_table({"variant_setups": [s.to_json_dict() for s in setups]})
    assert table is not None
    (row,) = table.rows
    assert row[0] == "inference_mode" and row[5] == "passed" and row[4] == "identical"


def test_a_variant_that_fails_its_gate_is_not_timed() -> None:
    # A model handed over in train mode keeps its dropout under `no_grad` (that variant keeps
    # the mode it was given), while the gate's reference is fp32 eager in eval mode.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.5))
    target = InferenceTarget("dropout", model.train(), torch.randn(3, 8), "cpu")
    calls, setups, notes = _prepare_variants(["no_grad", "eval"], target, lambda _: None)
    assert [s.name for s in setups] == ["no_grad", "eval"]
    assert not setups[0].accuracy.passed and setups[1].accuracy.passed
    assert list(calls) == ["eval"]
    assert notes == [
        "no_grad: not measured, it fails the accuracy gate against fp32 eager "
        f"({setups[0].accuracy.tolerance.describe()})"
    ]
