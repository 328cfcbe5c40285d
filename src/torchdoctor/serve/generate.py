"""Generative serving: time to first token (prefill) and time per output token (decode), per
request, versus prompt length and batch.

A request is one batch of prompts decoded greedily for `new_tokens` tokens. Its time to first
token (TTFT) runs from the request's start to its first new token computed: the prompt's
forward (with an empty KV cache, which it fills) and the argmax. Its time per output token
(TPOT) is the mean time of each later token. The device is synchronized before every clock
read, so a GPU's queued kernels are counted, not only their launch. With `use_cache=False`
each decode step recomputes the whole prefix, the baseline a KV cache is measured against.

Requests of the compared modes (with and without the cache) are interleaved in rounds, one of
each in a seeded random order, so that a drift of the machine's speed meets both alike and
neither always goes first: the i-th requests of two modes form a pair
(`measure.compare_samples(..., paired=True)`).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import Field

from torchdoctor.core.errors import WorkloadError
from torchdoctor.core.records import Record, SubRecord
from torchdoctor.measure import make_sync

if TYPE_CHECKING:
    import torch

#: Untimed requests before each (prompt length, batch) point's timed ones: the first call of a
#: shape pays for allocator growth and kernel selection (oneDNN, cuBLAS heuristics).
DEFAULT_WARMUP_REQUESTS = 1


class CachedDecoder(Protocol):
    """A decoder that serving can time step by step (`workloads.TinyGPT` is one)."""

    @property
    def block_size(self) -> int: ...

    def new_cache(self, batch: int) -> Any: ...

    def forward_cached(self, idx: torch.Tensor, cache: Any) -> torch.Tensor: ...


class RequestTiming(SubRecord):
    """One request: its time to first token and its mean time per later output token."""

    ttft_s: float = Field(ge=0)
    tpot_s: float | None = Field(default=None, ge=0)  # None: one new token, no decode step
    total_s: float = Field(ge=0)


class GenerationPoint(SubRecord):
    """The requests at one prompt length, batch and cache mode, and their medians."""

    prompt_len: int = Field(ge=1)
    batch: int = Field(ge=1)
    new_tokens: int = Field(ge=1)
    use_cache: bool
    requests: list[RequestTiming] = Field(min_length=1)
    ttft_median_s: float
    tpot_median_s: float | None


class GenerationProfile(Record):
    """TTFT and TPOT of a generative model versus prompt length and batch."""

    schema_name: ClassVar[str] = "serve_generation"
    schema_version: ClassVar[int] = 1

    model: str
    device: str
    warmup_requests: int = Field(ge=0)
    points: list[GenerationPoint]

    def point(self, prompt_len: int, batch: int, use_cache: bool) -> GenerationPoint:
        for p in self.points:
            if (p.prompt_len, p.batch, p.use_cache) == (prompt_len, batch, use_cache):
                return p
        raise KeyError((prompt_len, batch, use_cache))


def time_request(
    model: CachedDecoder,
    prompt: torch.Tensor,
    new_tokens: int,
    *,
    use_cache: bool,
    sync: Callable[[], None],
    clock: Callable[[], float] = time.perf_counter,
) -> RequestTiming:
    """Decode `new_tokens` tokens after `prompt` (batch, length) and time the request."""
    import torch

    with torch.no_grad():
        sync()
        start = clock()
        cache = model.new_cache(prompt.shape[0]) if use_cache else None
        logits = model.forward_cached(prompt, cache)
        token = logits[:, -1].argmax(dim=-1, keepdim=True)
        sync()
        first = clock()
        tokens = prompt
        for _ in range(new_tokens - 1):
            tokens = torch.cat([tokens, token], dim=1)
            logits = model.forward_cached(token if use_cache else tokens, cache)
            token = logits[:, -1].argmax(dim=-1, keepdim=True)
        sync()
        end = clock()
    return RequestTiming(
        ttft_s=first - start,
        tpot_s=(end - first) / (new_tokens - 1) if new_tokens > 1 else None,
        total_s=end - start,
    )


def _point(
    prompt_len: int, batch: int, new_tokens: int, use_cache: bool, timings: list[RequestTiming]
) -> GenerationPoint:
    tpots = [t.tpot_s for t in timings if t.tpot_s is not None]
    return GenerationPoint(
        prompt_len=prompt_len,
        batch=batch,
        new_tokens=new_tokens,
        use_cache=use_cache,
        requests=timings,
        ttft_median_s=statistics.median(t.ttft_s for t in timings),
        tpot_median_s=statistics.median(tpots) if tpots else None,
    )


def profile_generation(
    model: CachedDecoder,
    *,
    prompt_lengths: Sequence[int],
    batches: Sequence[int],
    new_tokens: int,
    requests: int,
    device: str | torch.device = "cpu",
    cache_modes: Sequence[bool] = (True,),
    warmup_requests: int = DEFAULT_WARMUP_REQUESTS,
    seed: int = 0,
    label: str = "",
    clock: Callable[[], float] = time.perf_counter,
) -> GenerationProfile:
    """TTFT and TPOT at every (prompt length, batch), `requests` timed requests per cache mode.

    `model` must already be on `device` and in eval mode. Prompts are seeded random tokens
    over the model's vocabulary (its embedding's rows when it has one, else 64). Raises
    WorkloadError before anything runs where a prompt and its new tokens exceed the model's
    context.
    """
    import torch

    if requests < 1 or new_tokens < 1:
        raise WorkloadError(
            f"requests ({requests}) and new tokens ({new_tokens}) must each be at least 1"
        )
    longest = max(prompt_lengths)
    if longest + new_tokens - 1 > model.block_size:
        raise WorkloadError(
            f"a prompt of {longest} tokens and {new_tokens} new tokens need "
            f"{longest + new_tokens - 1} positions; the model's context is {model.block_size}",
            hint="use shorter prompts or fewer new tokens",
        )
    vocab = getattr(getattr(model, "tok", None), "num_embeddings", 64)
    gen = torch.Generator().manual_seed(seed)
    order = random.Random(seed)
    sync = make_sync(device)
    points = []
    for prompt_len in prompt_lengths:
        for batch in batches:
            prompt = torch.randint(vocab, (batch, prompt_len), generator=gen).to(device)
            for _ in range(warmup_requests):
                for mode in cache_modes:
                    time_request(model, prompt, new_tokens, use_cache=mode, sync=sync, clock=clock)
            timings: dict[bool, list[RequestTiming]] = {mode: [] for mode in cache_modes}
            for _ in range(requests):
                round_modes = list(cache_modes)
                order.shuffle(round_modes)
                for mode in round_modes:
                    timings[mode].append(
                        time_request(
                            model, prompt, new_tokens, use_cache=mode, sync=sync, clock=clock
                        )
                    )
            points += [
                _point(prompt_len, batch, new_tokens, mode, timings[mode]) for mode in cache_modes
            ]
    return GenerationProfile(
        model=label or type(model).__name__,
        device=str(device),
        warmup_requests=warmup_requests,
        points=points,
    )
