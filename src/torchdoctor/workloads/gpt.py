"""`gpt`: a nanoGPT-style decoder-only transformer on a synthetic character stream.

The architecture follows Karpathy's nanoGPT (model.py): pre-LayerNorm blocks, causal
self-attention through `F.scaled_dot_product_attention(is_causal=True)`, a 4x GELU MLP, and
an output head tied to the token embedding. The text is a random first-order Markov chain over
a 64-character alphabet, so there is structure for the model to learn.

For inference, `TinyGPT.generate` decodes greedily with or without a `KVCache` (each layer's
keys and values of the tokens seen so far, so that a new token costs one position's work
instead of the whole prefix's); `forward_cached` is the one step serving times (prefill, then
one decode step per token).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset

from torchdoctor.core.errors import WorkloadError
from torchdoctor.core.optimizer import make_optimizer
from torchdoctor.workloads.base import SyntheticWorkload

VOCAB = 64
#: Characters each state's Markov row strongly prefers; keeps the stream's entropy low enough
#: that the loss visibly falls in a few dozen steps.
PREFERRED_NEXT = 4


def markov_text(length: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(VOCAB, VOCAB, generator=gen)
    favourites = torch.randint(VOCAB, (VOCAB, PREFERRED_NEXT), generator=gen)
    logits.scatter_add_(1, favourites, torch.full((VOCAB, PREFERRED_NEXT), 4.0))
    cdf = logits.softmax(dim=1).cumsum(dim=1).tolist()
    uniform = torch.rand(length, generator=gen).tolist()
    # A Markov chain is sequential; plain Python lists + bisect keep it ~1 us per character.
    text = [0] * length
    for i in range(1, length):
        text[i] = min(bisect.bisect_left(cdf[text[i - 1]], uniform[i]), VOCAB - 1)
    return torch.tensor(text, dtype=torch.long)


class CharChunks(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Consecutive `block`-character chunks; the target is the input shifted by one."""

    def __init__(self, text: torch.Tensor, block: int) -> None:
        self.text, self.block = text, block

    def __len__(self) -> int:
        return (self.text.numel() - 1) // self.block

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = index * self.block
        chunk = self.text[start : start + self.block + 1]
        return chunk[:-1], chunk[1:]


class KVCache:
    """Each layer's keys and values of the tokens seen so far, preallocated to the context.

    Shape per layer: (batch, heads, block, head_dim); `length` positions are filled. Writing a
    step's keys in place (rather than concatenating) keeps a decode step's cost independent of
    how many steps came before, as serving caches do (a preallocated, fixed-size cache).
    """

    def __init__(
        self,
        layers: int,
        batch: int,
        heads: int,
        block: int,
        head_dim: int,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        shape = (batch, heads, block, head_dim)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(layers)]
        self.block = block
        self.length = 0

    def append(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store `layer`'s keys/values of the new positions; return all positions' so far."""
        start, end = self.length, self.length + k.shape[2]
        self.keys[layer][:, :, start:end] = k
        self.values[layer][:, :, start:end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]


#: How attention is computed: torch's fused kernel, or written by hand as nanoGPT's slow path
#: does (matmul, mask, softmax, matmul), which `handwritten_attention` detects in a trace.
ATTENTION_KINDS = ("sdpa", "manual")


class CausalSelfAttention(nn.Module):
    def __init__(self, embd: int, heads: int, attention: str = "sdpa") -> None:
        super().__init__()
        self.heads = heads
        self.manual = attention == "manual"
        self.qkv = nn.Linear(embd, 3 * embd)
        self.proj = nn.Linear(embd, embd)

    def forward(
        self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0
    ) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        mask: torch.Tensor | None = None
        causal = True  # the top-left-aligned causal mask: keys and queries are the same tokens
        if cache is not None:
            past = cache.length
            if past == 0:
                cache.append(layer, k, v)
            else:
                k, v = cache.append(layer, k, v)
                # New position i (absolute past + i) sees every position up to itself. SDPA's
                # is_causal aligns the mask to the top-left corner, wrong when keys outnumber
                # queries, so the mask is explicit (None for one new token: it sees everything).
                causal = False
                if t > 1:
                    rows = torch.arange(t, device=x.device).unsqueeze(1) + past
                    mask = torch.arange(past + t, device=x.device).unsqueeze(0) <= rows
        if self.manual:
            # nanoGPT's attention without flash: the scores are materialized.
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            if causal:
                mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            if mask is not None:
                att = att.masked_fill(~mask, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, embd: int, heads: int, attention: str = "sdpa") -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(embd)
        self.attn = CausalSelfAttention(embd, heads, attention)
        self.ln2 = nn.LayerNorm(embd)
        self.mlp = nn.Sequential(nn.Linear(embd, 4 * embd), nn.GELU(), nn.Linear(4 * embd, embd))

    def forward(
        self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0
    ) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), cache, layer)
        return x + self.mlp(self.ln2(x))


def _init_weights(module: nn.Module) -> None:
    # nanoGPT's initialization: N(0, 0.02) weights, zero biases (GPT-2 paper, sec. 2.3).
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class TinyGPT(nn.Module):
    def __init__(
        self, block: int, layers: int, heads: int, embd: int, attention: str = "sdpa"
    ) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, embd)
        self.pos = nn.Embedding(block, embd)
        self.blocks = nn.ModuleList(Block(embd, heads, attention) for _ in range(layers))
        self.ln_f = nn.LayerNorm(embd)
        self.head = nn.Linear(embd, VOCAB, bias=False)
        self.head.weight = self.tok.weight  # weight tying, as in nanoGPT
        self.apply(_init_weights)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.forward_cached(idx, None)

    @property
    def block_size(self) -> int:
        return int(self.pos.num_embeddings)

    def new_cache(self, batch: int) -> KVCache:
        """An empty cache for `batch` sequences of up to `block_size` tokens."""
        first = self.blocks[0]
        assert isinstance(first, Block)
        heads, embd = first.attn.heads, self.tok.embedding_dim
        weight = self.tok.weight
        return KVCache(
            len(self.blocks),
            batch,
            heads,
            self.block_size,
            embd // heads,
            device=weight.device,
            dtype=weight.dtype,
        )

    def forward_cached(self, idx: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        """Logits of the positions in `idx`, which follow the `cache.length` cached ones.

        Without a cache, `idx` is the whole sequence (the training forward). With one, the
        first call is the prefill (the prompt) and each later call a decode step; the cache
        grows by `idx`'s length.
        """
        past = 0 if cache is None else cache.length
        if past + idx.shape[1] > self.block_size:
            raise WorkloadError(
                f"gpt: {past + idx.shape[1]} positions exceed the context of "
                f"{self.block_size} tokens",
                hint="shorten the prompt or generate fewer tokens, or build a larger `block`",
            )
        pos = torch.arange(past, past + idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for layer, block in enumerate(self.blocks):
            x = block(x, cache, layer)
        if cache is not None:
            cache.length += idx.shape[1]
        return self.head(self.ln_f(x))

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, n_new: int, use_cache: bool = True) -> torch.Tensor:
        """`prompt` (batch, t) followed by `n_new` greedily decoded tokens.

        With the cache each step runs the new token only; without it each step reruns the
        whole sequence so far (nanoGPT's `generate`). Greedy (argmax) decoding makes the two
        comparable token for token.
        """
        if n_new < 0:
            raise WorkloadError(f"gpt: n_new must be at least 0, got {n_new}")
        cache = self.new_cache(prompt.shape[0]) if use_cache else None
        tokens, step_input = prompt, prompt
        for _ in range(n_new):
            logits = self.forward_cached(step_input if use_cache else tokens, cache)
            step_input = logits[:, -1].argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, step_input], dim=1)
        return tokens


class GptWorkload(SyntheticWorkload):
    kind = "language"
    name = "gpt"
    description = "nanoGPT-style decoder (SDPA attention) on a synthetic character stream"

    param_names = ("block", "layers", "heads", "embd", "characters", "attention")

    def __init__(
        self,
        block: int = 64,
        layers: int = 4,
        heads: int = 4,
        embd: int = 128,
        characters: int = 65536,
        attention: str = "sdpa",
        batch_size: int = 16,
    ) -> None:
        if attention not in ATTENTION_KINDS:
            raise WorkloadError(
                f"gpt: unknown attention {attention!r}", hint=f"one of {', '.join(ATTENTION_KINDS)}"
            )
        self.attention = attention
        self.block, self.layers, self.heads, self.embd = block, layers, heads, embd
        self.characters = characters
        self.default_batch_size = batch_size
        self.tokens_per_sample = block
        self.sample_unit = f"a sequence of {block} characters"
        self.input_shapes = {"tokens": (block,)}

    def build_model(self) -> TinyGPT:
        return TinyGPT(self.block, self.layers, self.heads, self.embd, self.attention)

    def build_dataset(self, seed: int) -> CharChunks:
        return CharChunks(markov_text(self.characters, seed), self.block)

    def loss(self, output: Any, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output.reshape(-1, VOCAB), target.reshape(-1))

    def build_optimizer(self, params: Iterable[nn.Parameter], impl: str) -> torch.optim.Optimizer:
        return make_optimizer(torch.optim.AdamW, params, impl, lr=1e-3, weight_decay=0.1)

    def eval_metric(self, output: Any, target: torch.Tensor) -> float:
        """Perplexity."""
        return float(torch.exp(self.loss(output.detach(), target)))

    def checkpoint_blocks(self, model: nn.Module) -> list[nn.Module]:
        assert isinstance(model, TinyGPT)
        return list(model.blocks)
