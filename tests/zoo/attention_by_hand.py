"""Zoo: a tiny decoder whose attention is written by hand; planted: handwritten_attention.

`softmax(q @ k^T / sqrt(d)) @ v` with a causal mask, as nanoGPT writes it when flash attention
is unavailable. The diagnosis must find the pattern in the profiled window's trace and hand
back `scaled_dot_product_attention` (not a primary bottleneck of its own: a finding).
"""

import math
import sys

import torch
from torch import nn
from torch.nn import functional as F


class Attention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = att @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


def main(steps: int = 12) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)  # see tests/zoo/README.md
    width, block, vocab = 32, 64, 64
    model = nn.Sequential(nn.Embedding(vocab, width), Attention(width, 2), nn.Linear(width, vocab))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, vocab, (4096,))
    for step in range(steps):
        i = (step * 8 * block) % (data.numel() - 8 * block - 1)
        x = data[i : i + 8 * block].view(8, block)
        y = data[i + 1 : i + 1 + 8 * block].view(8, block)
        loss = F.cross_entropy(model(x).view(-1, vocab), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 12)
