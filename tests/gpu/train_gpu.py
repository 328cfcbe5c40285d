"""A small GPU training script for the GPU tier: planted syncs, AMP, DDP under torchrun.

Options: --steps N, --amp none|fp16|bf16, --init-scale S (a GradScaler scale that overflows
at first), --item K / --float K (K planted `loss.item()` / `float(loss)` per step), --ddp,
--ballast-gb G (G GiB of live device memory, as large weights would hold).
"""

import argparse
import os

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=60)
p.add_argument("--amp", choices=["none", "fp16", "bf16"], default="none")
p.add_argument("--init-scale", type=float, default=65536.0)
p.add_argument("--item", type=int, default=0)
p.add_argument("--float", type=int, default=0)
p.add_argument("--ddp", action="store_true")
p.add_argument("--ballast-gb", type=float, default=0.0)  # live device memory, like weights
a = p.parse_args()
local = int(os.environ.get("LOCAL_RANK", "0"))
dev = torch.device("cuda", local)
if a.ddp:
    import torch.distributed as dist

    torch.cuda.set_device(dev)
    dist.init_process_group("nccl")
ballast = torch.empty(int(a.ballast_gb * 2**30), dtype=torch.uint8, device=dev)
layers = [m for _ in range(4) for m in (nn.Linear(2048, 2048), nn.GELU())]
model: nn.Module = nn.Sequential(*layers, nn.Linear(2048, 10)).to(dev)
if a.ddp:
    model = nn.parallel.DistributedDataParallel(model, device_ids=[local])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
data = torch.utils.data.TensorDataset(torch.randn(256 * 32, 2048), torch.randint(0, 10, (8192,)))
loader = torch.utils.data.DataLoader(data, batch_size=256, shuffle=True, pin_memory=True)
scaler = torch.amp.GradScaler("cuda", init_scale=a.init_scale, enabled=a.amp == "fp16")
dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.amp)
it = 0
while it < a.steps:
    for x, y in loader:
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        for _ in range(a.item):
            loss.item()
        for _ in range(a.float):
            float(loss)
        it += 1
        if it >= a.steps:
            break
if a.ddp:
    dist.destroy_process_group()
