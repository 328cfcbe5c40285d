"""A built-in workload as one rank of a DDP job: `torchrun ... -m torchdoctor.scale._rank_train
WORKLOAD --batch B --steps S --backend gloo`.

An ordinary DDP training loop, as a user would write it (DistributedSampler, DDP at its
default bucket cap, the workload's own optimizer), run under the launcher's instrumentation,
which records each step and its phases per rank as it does for any script.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from torchdoctor.scale._ddp_params import record_ddp_parameters
from torchdoctor.scale._fsdp_probe import PROBE_LR, unhooked_step
from torchdoctor.scale._rank_bench import bench_if_asked
from torchdoctor.workloads import get_workload, move_to_device


def whole_step(args: argparse.Namespace) -> Callable[[], None]:
    """One training step of the workload as N=1 runs it, less DDP: a batch from a DataLoader
    over the workload's dataset, the forward, the backward and the workload's own optimizer.
    The co-location probe's work (`collectives.py`): ranks sharing a machine slow each phase
    by its own amount (the interpreter's work in data loading and a small model's optimizer
    does not slow as a matrix product does), so the probe times the phases in the job's mix.
    Its own copy of the model and optimizer, so the job's weights are untouched.

    The rank's instrumentation must not take these steps for the job's: it marks a step at
    `optimizer.step()` (through torch.optim's step hooks) or at `backward()` where there is no
    optimizer, and the job's step records would then open with the probe's, whose backward
    holds no all-reduce, diluting the measured communication. So the gradients come from
    `torch.autograd.grad` and the optimizer's step runs without its hooks (`unhooked_step`;
    where torch does not allow that, a plain SGD step on the gradients). The probe's batches
    and forward passes fall into the job's first step, which the study leaves out with the
    warm-up.
    """
    workload = get_workload(args.workload)
    torch.manual_seed(0)
    model = workload.build_model()
    params: list[torch.Tensor] = [p for p in model.parameters() if p.requires_grad]
    optimizer = workload.build_optimizer(model.parameters(), "foreach")
    update = unhooked_step(optimizer)
    loader = DataLoader(
        workload.build_dataset(0),
        batch_size=args.batch,
        shuffle=True,  # as DistributedSampler draws the job's batches
        drop_last=True,
        generator=torch.Generator().manual_seed(0),
    )
    batches = iter(loader)

    def step() -> None:
        nonlocal batches
        batch = next(batches, None)
        if batch is None:  # an epoch ended, as the job's loop starts the next
            batches = iter(loader)
            batch = next(batches)
        inputs, target = move_to_device(batch, torch.device("cpu"), non_blocking=False)
        grads = torch.autograd.grad(workload.loss(model(inputs), target), params)
        if update is None:
            with torch.no_grad():
                torch._foreach_add_(params, grads, alpha=-PROBE_LR)
            return
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        update()

    return step


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload")
    parser.add_argument("--batch", type=int, required=True, help="samples per rank per step")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--backend", default="gloo")
    args = parser.parse_args(argv)
    # before the job, in a group of its own; its co-location probe times this job's own step
    bench_if_asked(
        lambda: (
            f"{args.workload} training step (data, forward, backward, optimizer)",
            whole_step(args),
        )
    )
    record_ddp_parameters()
    dist.init_process_group(args.backend)
    device = torch.device("cpu")
    if args.backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    workload = get_workload(args.workload)
    torch.manual_seed(0)  # the same initial weights on every rank, as DDP expects
    model = workload.build_model().to(device)
    ddp = DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )
    optimizer = workload.build_optimizer(ddp.parameters(), "foreach")
    dataset = workload.build_dataset(0)
    sampler: DistributedSampler[Any] = DistributedSampler(dataset, seed=0, drop_last=True)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler, drop_last=True)
    done, epoch = 0, 0
    while done < args.steps:
        sampler.set_epoch(epoch)
        for batch in loader:
            inputs, target = move_to_device(batch, device, non_blocking=False)
            optimizer.zero_grad(set_to_none=True)
            loss = workload.loss(ddp(inputs), target)
            loss.backward()
            optimizer.step()
            done += 1
            if done >= args.steps:
                break
        epoch += 1
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
