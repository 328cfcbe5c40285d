"""An injected knob or a probe leaves the user's objects as it found them: a model trained under
them pickles (`torch.save(model, f)`), deep-copies (EMA, SWA) and round-trips its state_dict,
and the saved or copied model is the one the script built, without the knob."""

from __future__ import annotations

import copy
import io
import pickle
from typing import Any

import pytest
import torch
from torch import nn

from torchdoctor.collect.hooks import CollectConfig, Instrumentation
from torchdoctor.collect.inject import Injection
from torchdoctor.collect.probes.forward import FORWARD_SETTLE_STEPS
from torchdoctor.knobs.forward import CheckpointedForward, KnobForward


class _Blocks(nn.Module):
    """Repeated blocks (checkpointing) behind a conv (channels_last)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3)
        blocks = (nn.Sequential(nn.Linear(16, 16), nn.Tanh()) for _ in range(3))
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.conv(x).mean((2, 3))))


def _save_load(obj: Any) -> Any:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


def _hooks(module: nn.Module) -> int:
    return sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in module.modules())


# ---- the wrappers themselves ------------------------------------------------------------------


def test_a_knob_forward_pickles_and_copies_as_the_forward_it_replaced() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    x = torch.randn(3, 4)
    model.forward = KnobForward(model.forward, autocast=("cpu", torch.bfloat16))  # type: ignore[method-assign]
    assert model(x).dtype == torch.bfloat16
    for clone in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model), _save_load(model)):
        assert clone(x).dtype == torch.float32  # the model without the knob
        with torch.no_grad():
            clone.weight.add_(1.0)
        # its own weights, not the original's (a shared closure would run the original's)
        assert not torch.allclose(clone(x), model(x).float(), atol=0.1)
        assert torch.allclose(clone(x), x @ clone.weight.T + clone.bias)


def test_a_checkpointed_block_pickles_and_copies() -> None:
    block = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    block.forward = CheckpointedForward(block.forward)  # type: ignore[method-assign]
    x = torch.randn(2, 4, requires_grad=True)
    block(x).sum().backward()
    clone = copy.deepcopy(block)
    assert torch.equal(clone(x), block(x))
    assert torch.equal(_save_load(block)(x), block(x))


# ---- a script's model under every injected knob and the probes ---------------------------------

#: Every knob the injection applies to a model on a CPU, one recipe each.
MODEL_RECIPES: list[dict[str, Any]] = [
    {"precision": "bf16"},
    {"precision": "fp16"},
    {"compile": "default"},
    {"compile": "default", "compile_dynamic": True, "precision": "bf16"},
    {"channels_last": True},
    {"checkpointing": True},
    {"optimizer_impl": "foreach", "set_to_none": False},
    {"num_workers": 1, "threads": 1},
]


@pytest.mark.parametrize("recipe", MODEL_RECIPES, ids=lambda r: ",".join(r))
def test_a_trained_model_saves_copies_and_loads_under_the_injection(recipe: dict[str, Any]) -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _Blocks()
    x = torch.randn(2, 3, 6, 6)
    inst = Instrumentation(CollectConfig(warmup=0, profile_steps=0, cuda_events=False))
    injection = Injection(recipe, compile_backend="eager")
    if injection.model is not None:
        injection.model.on_compile = inst.forward.pin
    with inst, injection:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for step in range(FORWARD_SETTLE_STEPS + 2):
            opt.zero_grad()
            model(x).float().sum().backward()
            opt.step()
            if step == 1:
                # mid-training, as a script checkpoints after an epoch
                saved = _save_load(model)
                ema = copy.deepcopy(model)
                opt_copy = copy.deepcopy(opt)
                model.load_state_dict(_save_load(model.state_dict()))
                opt.load_state_dict(_save_load(opt.state_dict()))
        live_out = model(x)
    for clone in (saved, ema):
        assert "forward" not in vars(clone)
        assert all("forward" not in vars(m) for m in clone.modules())
        assert _hooks(clone) == 0  # no probe hook travels with the copy
        assert clone(x).dtype == torch.float32
        clone(x).sum().backward()  # and it trains
    assert "step" not in vars(opt_copy)
    assert torch.equal(ema.conv.weight, saved.conv.weight)
    if recipe.get("precision") == "bf16":
        assert live_out.dtype == torch.bfloat16  # the live model keeps its knob meanwhile
    torch._dynamo.reset()


def test_the_probes_hooks_on_a_model_stay_out_of_its_copies() -> None:
    # Many small modules: the forward probe moves its hooks onto the outermost module.
    model = nn.Sequential(*(nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(24)))
    inst = Instrumentation(CollectConfig(warmup=0, profile_steps=0, cuda_events=False))
    with inst:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(FORWARD_SETTLE_STEPS + 3):
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
        assert _hooks(model) == 2  # the probe's pre and post hooks, on the model
        assert _hooks(copy.deepcopy(model)) == 0
        assert _hooks(_save_load(model)) == 0
        assert _hooks(model) == 2  # the live model keeps them
    assert _hooks(model) == 0
    assert nn.Module.__getstate__ is vars(nn.Module)["__getstate__"]
