"""A step's owners measured from the tensors, and the GPU path through a fake CUDA allocator."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from torchdoctor.analyze.memory_fit import split_owners
from torchdoctor.collect.memory_owners import LiveTensorBytes, SavedActivations, measure_step_memory
from torchdoctor.core.errors import UsageError
from torchdoctor.knobs import Recipe
from torchdoctor.workloads import get_workload

# The CUDA caching allocator rounds every block up to 512 bytes, and takes memory from the
# device in segments: 2 MiB for blocks up to 1 MiB, else the size rounded up to 2 MiB
# (c10/cuda/CUDACachingAllocator.cpp: kMinBlockSize, kSmallBuffer, kRoundLarge); freed blocks
# stay reserved.
_BLOCK, _SMALL_SEGMENT, _ROUND_LARGE, _SMALL = 512, 2 << 20, 2 << 20, 1 << 20


class FakeCachingAllocator:
    """`torch.cuda`'s memory statistics, driven by the storages a step creates and frees.

    `scale` shrinks the segments (not the 512-byte blocks) so that a tiny model's step spans
    many of them, as a real model's does on a GPU.
    """

    def __init__(self, scale: int = 1) -> None:
        self.small, self.segment = _SMALL // scale, _SMALL_SEGMENT // scale
        self.round_large = _ROUND_LARGE // scale
        self.allocated = self.reserved = self.free_cached = 0
        self.allocated_peak = self.reserved_peak = 0

    def observe(self, delta: int) -> None:
        size = -(-abs(delta) // _BLOCK) * _BLOCK
        if delta < 0:
            self.allocated -= size
            self.free_cached += size
            return
        if self.free_cached >= size:
            self.free_cached -= size
        else:
            large = -(-size // self.round_large) * self.round_large
            segment = self.segment if size <= self.small else large
            self.reserved += segment
            self.free_cached += segment - size
        self.allocated += size
        self.allocated_peak = max(self.allocated_peak, self.allocated)
        self.reserved_peak = max(self.reserved_peak, self.reserved)

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        self.allocated_peak, self.reserved_peak = self.allocated, self.reserved

    def memory_stats(self, device: Any = None) -> dict[str, Any]:
        return {
            "allocated_bytes.all.peak": self.allocated_peak,
            "allocated_bytes.all.current": self.allocated,
            "reserved_bytes.all.peak": self.reserved_peak,
            "reserved_bytes.all.current": self.reserved,
        }


def _tiny() -> Any:
    return get_workload("mlp", features=8, hidden=32, layers=2, classes=4, rows=64)


def test_live_tensor_bytes_counts_new_storages_once_until_freed() -> None:
    x = torch.ones(256)  # made before the mode: not the step's
    with LiveTensorBytes() as live:
        y = x * 2  # 1 KiB
        view = y[:10]  # a view: no new storage
        y.add_(1)  # in place: no new storage
        z = torch.empty(512)  # 2 KiB
        assert live.current == 3072
        del z
        assert live.current == 1024 and live.peak == 3072
        assert live.mark() == 3072 and live.peak == 1024
    assert live.maxima == [3072]  # the one allocation followed by a free
    del view, y


def test_saved_activations_skip_parameters_and_count_shared_storage_once() -> None:
    layer = torch.nn.Linear(16, 16)
    x = torch.randn(4, 16, requires_grad=True)
    saved = SavedActivations(exclude={p.untyped_storage()._cdata for p in layer.parameters()})
    with saved.hooks():
        hidden = layer(x)
        out = (hidden * hidden).sum()  # hidden saved twice, one storage
    out.backward()
    assert saved.nbytes == x.nbytes + hidden.nbytes


def test_a_cpu_step_splits_into_its_owners() -> None:
    job = _tiny()
    small, large = (measure_step_memory(job, b) for b in (4, 16))
    params = sum(p.numel() * 4 for p in job.build_model().parameters())
    assert small.source == "tensors" and small.phase_reserved_peaks is None
    assert small.parameters_bytes == params and small.gradients_bytes == params
    assert small.optimizer_state_bytes >= 2 * params  # AdamW's two moments
    # Activations grow with the batch in proportion; the resident owners do not.
    assert large.activations_bytes > small.activations_bytes > 0
    # (up to a few scalars the loss saves, which do not grow with the batch)
    assert abs(large.activations_bytes - 4 * small.activations_bytes) <= 64
    assert large.parameters_bytes == small.parameters_bytes
    owners = split_owners(small)
    assert owners.peak_bytes >= small.parameters_bytes + small.optimizer_state_bytes
    # At the peak, the owners add up to it; activations are at most all that was saved.
    assert sum(small.at_peak.values()) + small.parameters_bytes + small.optimizer_state_bytes == (
        small.peak_bytes
    )
    assert 0 <= owners.activations_at_peak_bytes <= small.activations_bytes
    assert owners.gradients_at_peak_bytes <= small.gradients_bytes
    assert max(small.timeline) == small.peak_bytes
    assert len(small.timeline) == len(large.timeline)  # same ops: the timelines align


def test_the_gpu_path_reads_the_allocator_and_its_slack() -> None:
    fake = FakeCachingAllocator()
    step = measure_step_memory(_tiny(), 8, allocator=fake, listeners=[fake.observe])
    assert step.source == "cuda_allocator"
    assert step.phase_reserved_peaks is not None
    tensors_only = measure_step_memory(_tiny(), 8)
    # Rounded to 512-byte blocks, the allocator's peak is at least the tensors'; its reserved
    # segments at least that. The difference is the allocator's slack.
    owners = split_owners(step)
    assert step.peak_bytes >= tensors_only.peak_bytes - tensors_only.parameters_bytes * 3
    assert owners.slack_bytes is not None and owners.slack_bytes > 0
    assert owners.slack_bytes == max(step.phase_reserved_peaks.values()) - step.peak_bytes
    assert owners.footprint_bytes == max(step.phase_reserved_peaks.values())


def test_a_compiled_step_is_refused_before_it_runs() -> None:
    with pytest.raises(UsageError, match="eager step"):
        measure_step_memory(_tiny(), 4, recipe=Recipe({"compile": "default"}))


def test_a_batch_larger_than_the_dataset_is_refused() -> None:
    with pytest.raises(UsageError, match="larger than mlp's dataset"):
        measure_step_memory(_tiny(), 65)  # the tiny dataset holds 64 rows


def test_the_gpu_prediction_lands_near_the_fake_allocators_edge() -> None:
    from torchdoctor.analyze import plan_memory, predict_max_batch
    from torchdoctor.analyze.memory_study import footprint

    job = get_workload("mlp", features=16, hidden=64, layers=1, classes=4, rows=512)

    def measure(batch: int) -> Any:
        fake = FakeCachingAllocator(scale=256)  # 8 KiB segments; a fresh process each time
        return measure_step_memory(job, batch, allocator=fake, listeners=[fake.observe])

    cap = 96 * 1024
    plan = plan_memory("mlp", [measure(b) for b in (4, 8, 16)], budget_bytes=cap)
    predicted = predict_max_batch(plan, cap)
    assert predicted > 4 * 16  # far past the measured batches
    # The edge lies within 10% of the prediction: a step fits 10% below it, not 10% above.
    assert footprint(measure(int(predicted * 0.9))) <= cap
    assert footprint(measure(int(predicted * 1.1) + 1)) > cap
