"""The accuracy gate's arithmetic and the fallback's search, on tensors and scripted errors."""

from __future__ import annotations

import json
import math

import pytest
import torch

from torchdoctor.serve.accuracy import (
    OutputError,
    Tolerance,
    VariantAccuracy,
    fallback_modules,
    output_error,
    within,
)

CLOSE = Tolerance(kind="allclose", atol=1e-4, rtol=1e-4, source="test")
SQNR_30 = Tolerance(kind="sqnr", min_sqnr_db=30.0, source="test")


def test_errors_are_measured_over_every_floating_output() -> None:
    ref = (torch.tensor([1.0, -2.0]), {"b": torch.tensor([4.0]), "i": torch.tensor([1])})
    out = (torch.tensor([1.0, -2.0]), {"b": torch.tensor([4.4]), "i": torch.tensor([7])})
    error = output_error(ref, out, CLOSE)
    assert error.max_abs_error == pytest.approx(0.4)
    assert error.max_rel_error == pytest.approx(0.4 / 4.0)  # normwise: over max |ref|
    # ||ref|| = sqrt(1 + 4 + 16), ||noise|| = 0.4; the integer output is not compared.
    assert error.sqnr_db == pytest.approx(20 * math.log10(math.sqrt(21) / 0.4))
    assert not error.within_allclose and not within(error, CLOSE)
    assert not within(error, SQNR_30)  # 21.2 dB
    assert within(error, Tolerance(kind="sqnr", min_sqnr_db=20.0, source="test"))


def test_identical_outputs_have_no_finite_sqnr_and_pass_every_gate() -> None:
    ref = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    error = output_error(ref, ref.clone(), CLOSE)
    assert error.sqnr_db is None and error.max_abs_error == 0.0
    assert within(error, CLOSE) and within(error, SQNR_30)


def test_a_nan_fails_every_gate_and_still_writes_json() -> None:
    error = output_error(torch.ones(2), torch.tensor([1.0, math.nan]), CLOSE)
    assert not error.finite and not within(error, CLOSE) and not within(error, SQNR_30)
    record = VariantAccuracy(variant="v", tolerance=CLOSE, error=error, passed=False)
    text = json.dumps(record.model_dump(mode="json"), allow_nan=False)  # as Record.to_json
    assert VariantAccuracy.model_validate(json.loads(text)) == record


def test_outputs_of_another_structure_are_refused() -> None:
    with pytest.raises(ValueError, match="differ in structure"):
        output_error(torch.ones(2, 3), torch.ones(3, 2), CLOSE)


def _scripted(breaking: set[str]) -> tuple[list[frozenset[str]], object]:
    """An error function: passes once every module of `breaking` is kept; each kept one of
    them raises the SQNR by 20 dB from 0."""
    calls: list[frozenset[str]] = []

    def error_keeping(names: frozenset[str]) -> OutputError:
        calls.append(names)
        db = 40.0 if breaking <= names else 20.0 * len(breaking & names) / len(breaking)
        return OutputError(max_abs_error=1.0, max_rel_error=1.0, sqnr_db=db, within_allclose=False)

    return calls, error_keeping


def test_the_fallback_keeps_the_one_module_that_breaks_the_gate() -> None:
    calls, error_keeping = _scripted({"b"})
    found = fallback_modules(["a", "b", "c"], error_keeping, SQNR_30)  # type: ignore[arg-type]
    assert found is not None and found[0] == ["b"]
    assert len(calls) == 4  # three single tries, then the first ranked one kept


def test_the_fallback_adds_modules_until_the_gate_passes() -> None:
    _, error_keeping = _scripted({"a", "c"})
    found = fallback_modules(["a", "b", "c"], error_keeping, SQNR_30)  # type: ignore[arg-type]
    assert found is not None and sorted(found[0]) == ["a", "c"]


def test_no_fallback_when_keeping_every_module_still_fails() -> None:
    def error_keeping(names: frozenset[str]) -> OutputError:
        return OutputError(max_abs_error=1, max_rel_error=1, sqnr_db=3.0, within_allclose=False)

    assert fallback_modules(["a", "b"], error_keeping, SQNR_30) is None
