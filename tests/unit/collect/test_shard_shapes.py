"""What the per-rank arithmetic reads of a workload without materialising it: the units and
the optimizer's state from the `meta` device, the activations from fake steps (held to the
same step run on real tensors)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchdoctor.collect.shard_memory import (
    fake_activations,
    meta_shape,
    model_shape,
    param_dtype_of,
)
from torchdoctor.core.errors import UsageError
from torchdoctor.workloads import get_workload

TINY_GPT = {"layers": 2, "embd": 8, "heads": 2, "block": 4, "characters": 256}


def test_a_meta_gpt_is_counted_by_its_architecture() -> None:
    shape = meta_shape(get_workload("gpt", **TINY_GPT))
    d, t = 8, 4
    block = 12 * d * d + 13 * d  # ln1, qkv, proj, ln2, the two MLP layers
    root = 64 * d + t * d + 2 * d  # tok, pos, ln_f; the head is tied to tok and counted once
    assert [u.name for u in shape.units] == ["blocks.0", "blocks.1", ""]
    assert [u.numel for u in shape.units] == [block, block, root]
    assert shape.parameter_count == 2 * 12 + 4
    assert (shape.optimizer, shape.states_per_element, shape.scalar_states_per_parameter) == (
        "AdamW",
        2,
        1,
    )
    assert shape.parameter_bytes == shape.state_bytes == 4 and shape.buffers_bytes == 0


@pytest.mark.parametrize(
    ("make", "states", "scalars"),
    [
        (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 1, 0),
        (lambda p: torch.optim.SGD(p, lr=0.1), 0, 0),
        (lambda p: torch.optim.Adam(p, amsgrad=True), 3, 1),
        (lambda p: torch.optim.RMSprop(p, momentum=0.9, centered=True), 3, 1),
    ],
)
def test_optimizer_state_by_kind(make, states: int, scalars: int) -> None:  # type: ignore[no-untyped-def]
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    shape = model_shape(model, [], make(model.parameters()))
    assert (shape.states_per_element, shape.scalar_states_per_parameter) == (states, scalars)
    assert [u.name for u in shape.units] == [""]
    # BatchNorm's running mean, variance (fp32) and its batch count (int64), whole
    assert shape.buffers_bytes == 3 * 4 * 2 + 8


def test_an_optimizer_without_arithmetic_is_refused() -> None:
    model = nn.Linear(2, 2)
    with pytest.raises(UsageError, match="LBFGS"):
        model_shape(model, [], torch.optim.LBFGS(model.parameters()))
    with pytest.raises(UsageError, match="unknown parameter dtype"):
        param_dtype_of("int8")


def test_fake_steps_count_what_the_same_step_holds_on_real_tensors() -> None:
    from torch.distributed._tools.mem_tracker import MemTracker

    from torchdoctor.workloads.base import collate_first

    workload = get_workload("gpt", **TINY_GPT)
    fake = fake_activations(workload, param_dtype=torch.bfloat16, batch_sizes=(1, 3))
    assert fake[3][0][0] > fake[1][0][0] > 0
    # the peak's moment, then one per parameter as its gradient lands, all of them by the end
    landed = [share for _, share in fake[3][1:]]
    assert len(landed) == 2 * 12 + 4 and landed == sorted(landed) and landed[-1] == 1.0
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = workload.build_model()
    finally:
        torch.set_default_dtype(torch.float32)
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(lambda q: setattr(q, "grad", None))
    for batch in (1, 3):
        inputs, target = collate_first(workload.build_dataset(0), batch)
        tracker = MemTracker()
        tracker.track_external(model, inputs, target)
        with tracker:
            workload.loss(model(inputs), target).backward()
        peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
        held = {str(getattr(k, "value", k)): v for k, v in peak.items()}
        assert fake[batch][0][0] == held["Total"] - held["Parameter"] - held["Buffer"]
