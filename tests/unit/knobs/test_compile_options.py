"""`compile_model`'s inductor options: passed to torch.compile for this compilation only."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchdoctor.core.errors import KnobError
from torchdoctor.knobs import compile_model


def test_options_reach_torch_compile_with_the_default_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def fake_compile(model: nn.Module, **kwargs: object) -> nn.Module:
        seen.update(kwargs)
        return model

    monkeypatch.setattr(torch, "compile", fake_compile)
    compile_model(nn.Linear(2, 2), "default", dynamic=False, options={"freezing": True})
    assert seen == {"options": {"freezing": True}, "dynamic": False}


def test_options_with_another_mode_are_refused() -> None:
    # torch.compile itself refuses a mode with options; say so before it does.
    with pytest.raises(KnobError, match="a mode or inductor options, not both"):
        compile_model(nn.Linear(2, 2), "max-autotune", dynamic=False, options={"freezing": True})
