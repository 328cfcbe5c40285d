"""What is served: a built-in model, a user's factory, and the ways they fail."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from torchdoctor.core.errors import WorkloadError
from torchdoctor.serve.target import load_target

GOOD = """
import torch
def make_model():
    return torch.nn.Linear(4, 2), torch.randn(3, 4)
"""
RAISES = """
def make_model():
    raise RuntimeError("no weights here")
"""
EVAL_FAILS = """
import torch
class Net(torch.nn.Module):
    def forward(self, x):
        if not self.training:
            raise ValueError("dropout layer needs training mode")
        return x
def make_model():
    return Net(), torch.randn(2, 4)
"""
WRONG_RETURN = """
def make_model():
    return 42
"""


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "model.py"
    path.write_text(text)
    return f"{path}:make_model"


def test_a_factory_model_is_served_in_eval_mode_at_any_batch(tmp_path: Path) -> None:
    target = load_target(_file(tmp_path, GOOD))
    assert not target.model.training and target.example_batch_size == 3
    out = target.request(5)()
    assert isinstance(out, torch.Tensor) and out.shape == (5, 2)
    assert target.batch(2).shape == (2, 4)


def test_a_builtin_workload_gives_its_model() -> None:
    target = load_target("mlp")
    assert not target.model.training
    assert target.request(4)() is not None


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (RAISES, "model factory '.*' failed: RuntimeError: no weights here"),
        (EVAL_FAILS, "fails in eval mode: ValueError: dropout layer needs training mode"),
        (WRONG_RETURN, r"returned int, not \(module, example_inputs\)"),
    ],
)
def test_a_failing_factory_or_model_is_one_workload_error(
    tmp_path: Path, source: str, message: str
) -> None:
    with pytest.raises(WorkloadError, match=message):
        load_target(_file(tmp_path, source))


def test_a_missing_file_or_workload_is_a_workload_error(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="does not exist"):
        load_target(f"{tmp_path}/absent.py:make_model")
    with pytest.raises(WorkloadError):
        load_target("no_such_workload")
