"""Time to first token and time per output token, per request, on a tiny gpt."""

from __future__ import annotations

import pytest
import torch

from torchdoctor.core.errors import WorkloadError
from torchdoctor.serve.generate import GenerationProfile, profile_generation, time_request
from torchdoctor.workloads import TinyGPT


class SyncedClock:
    """A clock that fails a read not preceded by a device synchronize; one tick per read."""

    def __init__(self) -> None:
        self.now, self.synced, self.syncs = 0.0, False, 0

    def sync(self) -> None:
        self.synced, self.syncs = True, self.syncs + 1

    def __call__(self) -> float:
        assert self.synced, "a clock was read without synchronizing the device first"
        self.synced = False
        self.now += 1.0
        return self.now


def _gpt() -> TinyGPT:
    torch.manual_seed(0)
    return TinyGPT(block=16, layers=1, heads=2, embd=8).eval()


@pytest.mark.parametrize("use_cache", [True, False])
def test_a_request_reads_the_clock_after_a_sync_at_start_first_token_and_end(
    use_cache: bool,
) -> None:
    clock = SyncedClock()
    prompt = torch.zeros(2, 4, dtype=torch.long)
    timing = time_request(_gpt(), prompt, 5, use_cache=use_cache, sync=clock.sync, clock=clock)
    assert clock.syncs == 3
    assert timing.ttft_s == 1.0 and timing.total_s == 2.0
    assert timing.tpot_s == pytest.approx(1.0 / 4)  # the decode's tick over its 4 tokens


def test_one_new_token_has_no_time_per_output_token() -> None:
    clock = SyncedClock()
    prompt = torch.zeros(1, 3, dtype=torch.long)
    timing = time_request(_gpt(), prompt, 1, use_cache=True, sync=clock.sync, clock=clock)
    assert timing.tpot_s is None and timing.ttft_s == 1.0


def test_a_profile_holds_every_point_and_its_requests_and_reads_back() -> None:
    profile = profile_generation(
        _gpt(),
        prompt_lengths=[2, 6],
        batches=[1, 3],
        new_tokens=4,
        requests=3,
        cache_modes=(True, False),
        label="tiny gpt",
    )
    assert len(profile.points) == 2 * 2 * 2
    point = profile.point(6, 3, use_cache=False)
    assert len(point.requests) == 3 and point.new_tokens == 4
    assert point.ttft_median_s > 0 and point.tpot_median_s is not None
    assert GenerationProfile.from_json_dict(profile.to_json_dict()) == profile


def test_prompts_past_the_context_are_refused_before_anything_runs() -> None:
    with pytest.raises(WorkloadError, match="need 17 positions; the model's context is 16"):
        profile_generation(_gpt(), prompt_lengths=[2, 14], batches=[1], new_tokens=4, requests=1)
