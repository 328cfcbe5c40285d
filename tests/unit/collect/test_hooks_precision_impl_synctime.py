"""What the instrumentation records about precision, optimizer implementation and sync time."""

from __future__ import annotations

import torch
from torch import nn

from torchdoctor.collect import CollectConfig, Instrumentation

#: Printing this tensor formats 512 numbers in Python: ~milliseconds, far above timer noise.
PRINTED_SHAPE = (32, 16)


def _loop(steps: int, opt_kwargs: dict, *, autocast: bool, printing: bool) -> None:
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, **opt_kwargs)
    shown = torch.randn(*PRINTED_SHAPE)
    for _ in range(steps):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(torch.randn(8, 4))
        loss = out.float().pow(2).mean()
        if printing:
            repr(shown)  # what print(tensor) does
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def test_fused_optimizer_and_autocast_dtype_are_recorded() -> None:
    with Instrumentation(CollectConfig(warmup=0, profile_steps=0)) as inst:
        _loop(3, {"fused": True}, autocast=True, printing=False)
    profile = inst.result()
    assert profile.optimizer_impls == ["fused"]
    assert profile.autocast_dtypes == ["bfloat16"]


def test_default_cpu_optimizer_is_the_for_loop_and_no_autocast() -> None:
    with Instrumentation(CollectConfig(warmup=0, profile_steps=0)) as inst:
        _loop(2, {}, autocast=False, printing=False)
    profile = inst.result()
    assert profile.optimizer_impls == ["for_loop"]
    assert profile.autocast_dtypes == []


def test_time_inside_sync_calls_is_measured_per_step() -> None:
    steps = 4
    with Instrumentation(CollectConfig(warmup=0, profile_steps=0)) as inst:
        _loop(steps, {"foreach": True}, autocast=False, printing=True)
    profile = inst.result()
    assert profile.optimizer_impls == ["foreach"]
    assert len(profile.sync_seconds) == len(profile.sync_outside_seconds) == steps
    # The repr ran outside every named phase, and it is the bulk of what each step did
    # besides the tiny model; each step's sync time fits inside that step's `other`.
    for s, outside, step in zip(
        profile.sync_seconds, profile.sync_outside_seconds, profile.steps, strict=True
    ):
        assert s > 0 and outside == s
        assert outside <= step.phases["other"] + 1e-9


def test_forward_hooks_move_from_global_to_the_model_once_it_is_known() -> None:
    from torch.nn.modules import module as module_mod

    from torchdoctor.collect.hooks import FORWARD_SETTLE_STEPS

    steps = FORWARD_SETTLE_STEPS + 3
    # 64 tiny inner modules: the global hooks' cost on them is well over 1% of a step.
    model = nn.Sequential(*(nn.Sequential(nn.Linear(4, 4), nn.ReLU()) for _ in range(32)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    global_before = len(module_mod._global_forward_pre_hooks)
    inst = Instrumentation(CollectConfig(warmup=0, profile_steps=0))
    inst.install()
    try:
        for _ in range(steps):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        # Settled: no global hook left, one pre and one post hook on the outermost module only.
        assert len(module_mod._global_forward_pre_hooks) == global_before
        assert len(model._forward_pre_hooks) == 1 and len(model._forward_hooks) == 1
        assert not model[0]._forward_pre_hooks
    finally:
        inst.uninstall()
    assert not model._forward_pre_hooks and not model._forward_hooks
    profile = inst.result()
    assert profile.step_count == steps and profile.forward.calls == steps
    assert all(s.phases["forward"] > 0 for s in profile.steps)  # before and after the switch


def test_cheap_global_forward_hooks_stay_and_see_a_later_model() -> None:
    """A model with no inner modules saves nothing by the switch: the global hooks stay, so a
    separate evaluation model called after training is still seen."""
    from torchdoctor.collect.hooks import FORWARD_SETTLE_STEPS

    with Instrumentation(CollectConfig(warmup=0, profile_steps=0)) as inst:
        _loop(FORWARD_SETTLE_STEPS + 2, {}, autocast=False, printing=False)
        nn.Linear(4, 1)(torch.randn(2, 4))
    assert inst.result().forward.calls == FORWARD_SETTLE_STEPS + 2 + 1
