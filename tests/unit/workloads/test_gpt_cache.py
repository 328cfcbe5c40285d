"""gpt's KV cache: decoding with it gives what recomputing the whole prefix gives."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from torchdoctor.core.errors import WorkloadError
from torchdoctor.workloads import TinyGPT

#: fp32 logits computed over a cached prefix vs the whole sequence differ only by the order of
#: the attention's sums: torch.testing.assert_close's float32 defaults (rtol 1.3e-6,
#: atol 1e-5).
ATOL, RTOL = 1e-5, 1.3e-6


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """A tiny model gains nothing from threads; on a shared 2-core runner OpenMP's
    spin-waiting threads make its forwards hundreds of times slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _model(block: int = 24, attention: str = "sdpa") -> TinyGPT:
    torch.manual_seed(0)
    return TinyGPT(block=block, layers=2, heads=2, embd=16, attention=attention).eval()


@pytest.mark.parametrize("attention", ["sdpa", "manual"])
def test_cached_logits_match_the_full_forward_position_by_position(attention: str) -> None:
    model = _model(attention=attention)
    tokens = torch.randint(64, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(tokens)
        cache = model.new_cache(3)
        # A prefill of 8 tokens, a chunk of 5 (the explicit-mask path), then single tokens.
        pieces = [model.forward_cached(tokens[:, :8], cache)]
        pieces.append(model.forward_cached(tokens[:, 8:13], cache))
        pieces += [model.forward_cached(tokens[:, i : i + 1], cache) for i in range(13, 20)]
    assert cache.length == 20
    cached = torch.cat(pieces, dim=1)
    # torch.allclose rather than torch.testing.assert_close, whose first call costs seconds.
    assert torch.allclose(cached, full, atol=ATOL, rtol=RTOL), (cached - full).abs().max()


def test_generate_with_and_without_the_cache_gives_the_same_tokens() -> None:
    model = _model()
    prompt = torch.randint(64, (2, 6), generator=torch.Generator().manual_seed(2))
    cached = model.generate(prompt, 12, use_cache=True)
    recomputed = model.generate(prompt, 12, use_cache=False)
    assert cached.shape == (2, 18)
    assert torch.equal(cached[:, :6], prompt)
    assert torch.equal(cached, recomputed)


def test_the_training_forward_is_unchanged_by_the_cache_path() -> None:
    # forward(idx) is forward_cached(idx, None): the causal SDPA of the whole sequence, and a
    # prefix's logits do not depend on the tokens after it.
    model = _model()
    tokens = torch.randint(64, (1, 10), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert torch.allclose(model(tokens)[:, :4], model(tokens[:, :4]), atol=ATOL, rtol=RTOL)


def test_generating_past_the_context_is_a_workload_error() -> None:
    model = _model(block=8)
    with pytest.raises(WorkloadError, match="9 positions exceed the context of 8"):
        model.generate(torch.zeros(1, 5, dtype=torch.long), 5)
