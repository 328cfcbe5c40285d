"""`gpt`: a nanoGPT-style decoder-only transformer on a synthetic character stream.

The architecture follows Karpathy's nanoGPT (model.py): pre-LayerNorm blocks, causal
self-attention through `F.scaled_dot_product_attention(is_causal=True)`, a 4x GELU MLP, and
an output head tied to the token embedding. The text is a random first-order Markov chain over
a 64-character alphabet, so there is structure for the model to learn.
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.manual:
            # nanoGPT's attention without flash: the (t, t) scores are materialized.
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
            y = att @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, embd: int, heads: int, attention: str = "sdpa") -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(embd)
        self.attn = CausalSelfAttention(embd, heads, attention)
        self.ln2 = nn.LayerNorm(embd)
        self.mlp = nn.Sequential(nn.Linear(embd, 4 * embd), nn.GELU(), nn.Linear(4 * embd, embd))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
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
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


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
