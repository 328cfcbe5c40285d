"""Zoo: host work in one planted line; planted: other_host, at `PLANTED_LINE`.

A small pre-batched MLP whose step is dominated by Python after the update: `tokenize`
splits and hashes a synthetic log line per sample, in a pure-Python loop. The line sampler
must name the marked line as the top line, in a single process and on every torchrun rank
(`python -m torch.distributed.run --nproc-per-node 2 host_work_planted_line.py N`: each rank
trains its own copy, DDP-free, and meets the others at one gloo barrier after the loop; a
barrier per step would put the faster rank's wait for the slower one at the barrier's line,
which is where that rank's time really goes).
"""

import os
import sys

import torch
from torch import nn

data = torch.randn(2048, 32)
target = torch.randn(2048, 1)


def tokenize(step: int, rows: int = 64) -> int:
    total = 0
    for r in range(rows):
        total += sum(hash(w) % 7 for w in f"step {step} row {r} ".split() * 300)  # PLANTED_LINE
    return total


def main(iters: int = 30) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)  # see tests/zoo/README.md: one thread keeps the shares stable
    dist = None
    if "RANK" in os.environ:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for it in range(iters):
        i = (it * 32) % (data.shape[0] - 32)
        loss = nn.functional.mse_loss(model(data[i : i + 32]), target[i : i + 32])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        tokenize(it)
    if dist is not None:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
