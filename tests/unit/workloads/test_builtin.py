"""Each built-in workload builds, is deterministic from its seed, and trains."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils.data import default_collate

from torchdoctor.workloads import get_workload

SMALL: dict[str, dict[str, Any]] = {
    "cnn": {"width": 4, "images": 32, "decode_cost_us": 0, "batch_size": 4},
    "gpt": {"block": 16, "layers": 1, "heads": 2, "embd": 16, "characters": 512, "batch_size": 4},
    "mlp": {"rows": 64, "batch_size": 4},
    "recsys": {"rows": 100, "impressions": 64, "batch_size": 4},
}


def _batch(wl: Any, seed: int) -> Any:
    ds = wl.build_dataset(seed)
    return default_collate([ds[i] for i in range(wl.default_batch_size)])


@pytest.mark.parametrize("name", sorted(SMALL))
def test_dataset_is_deterministic_from_seed(name: str) -> None:
    wl = get_workload(name, **SMALL[name])
    a, b, c = _batch(wl, 1), _batch(wl, 1), _batch(wl, 2)
    flat = torch.utils._pytree.tree_leaves
    assert all(torch.equal(x, y) for x, y in zip(flat(a), flat(b), strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(flat(a), flat(c), strict=True))


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("impl", ["for_loop", "foreach", "fused"])
def test_model_trains_with_every_optimizer_impl(name: str, impl: str) -> None:
    wl = get_workload(name, **SMALL[name])
    torch.manual_seed(0)
    model = wl.build_model()
    opt = wl.build_optimizer(model.parameters(), impl)
    inputs, target = wl.to_device(_batch(wl, 0), torch.device("cpu"), non_blocking=False)
    before = [p.detach().clone() for p in model.parameters()]
    loss = wl.loss(model(inputs), target)
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    opt.step()
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
    metric = wl.eval_metric(model(inputs), target)  # type: ignore[attr-defined]
    assert isinstance(metric, float)


def test_input_shapes_match_a_sample() -> None:
    for name, params in SMALL.items():
        wl = get_workload(name, **params)
        inputs, _ = wl.build_dataset(0)[0]
        tensors = inputs if isinstance(inputs, tuple) else (inputs,)
        shapes = [tuple(t.shape) for t in tensors]
        assert shapes == [tuple(s) for s in wl.input_shapes.values()], name


def test_gpt_reports_tokens_per_sample() -> None:
    assert get_workload("gpt", block=32).tokens_per_sample == 32
    assert get_workload("mlp").tokens_per_sample is None


def test_cnn_decode_cost_burns_cpu_time() -> None:
    import resource
    import time

    def voluntary_switches() -> int:
        # A thread that sleeps or waits gives the CPU up (a voluntary context switch); a
        # busy one loses it only when the scheduler preempts it (involuntary), however
        # loaded the host is. CPU time itself would shrink with the host's load.
        return resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw

    slow = get_workload("cnn", images=8, decode_cost_us=20_000).build_dataset(0)
    slow[1]  # the first item may pay one-time costs (allocations, lazy imports)
    before, start = voluntary_switches(), time.perf_counter()
    slow[0]
    elapsed, switches = time.perf_counter() - start, voluntary_switches() - before
    assert elapsed >= 0.020
    assert switches == 0, f"{switches} voluntary context switches: the decode cost waited"
    # The check can fail: the same 20 ms as a sleep gives the CPU up.
    before = voluntary_switches()
    time.sleep(0.020)
    assert voluntary_switches() > before
