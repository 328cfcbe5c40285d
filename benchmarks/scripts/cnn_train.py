"""The built-in `cnn` workload written as the plain training script a user would write.

The model, the dataset, the loss and the optimizer come from torchdoctor's own `cnn` workload
(`torchdoctor.workloads.cnn.CnnWorkload`, default parameters), so there is one definition of
each; everything around them is what the engine does for a workload
(`torchdoctor.engine.session.TrainingSession`, `torchdoctor.engine.loader.build_loader`),
written out as an ordinary loop with no torchdoctor call in it:

- `torch.manual_seed(seed)` right before the model is built (the initial weights depend on
  the seed alone), the dataset built with the same seed;
- a shuffled `DataLoader` with `drop_last=True` whose order comes from a generator seeded
  with the seed, the workload's batch size and worker count (0), no pinned memory;
- SGD as the workload builds it, with torch's default implementation for the device (the
  for-loop on a CPU, foreach on CUDA: the `optimizer_impl` knob's defaults);
- the model in training mode; each step `zero_grad(set_to_none=True)`, forward, loss,
  backward, `optimizer.step()`; a new epoch when the loader runs out.

Used by `benchmarks/bench_script_vs_workload.py`: `torchdoctor tune cnn` and
`torchdoctor tune -- python benchmarks/scripts/cnn_train.py` should find the same recipe.

    python benchmarks/scripts/cnn_train.py --steps 20
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.data import DataLoader

from torchdoctor.workloads.cnn import CnnWorkload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps to run")
    parser.add_argument("--seed", type=int, default=0, help="seed for weights and data")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if any)")
    parser.add_argument("--log-every", type=int, default=20, help="print the loss every N")
    args = parser.parse_args()
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))

    workload = CnnWorkload()
    torch.manual_seed(args.seed)
    model = workload.build_model().to(device)
    impl = "foreach" if device.type == "cuda" else "for_loop"
    optimizer = workload.build_optimizer(model.parameters(), impl)
    dataset = workload.build_dataset(args.seed)
    loader = DataLoader(
        dataset,
        batch_size=workload.default_batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=workload.default_num_workers,
        generator=torch.Generator().manual_seed(args.seed),
    )

    model.train()
    step = 0
    start = time.perf_counter()
    while step < args.steps:
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad(set_to_none=True)
            output = model(images)
            loss = workload.loss(output, labels)
            loss.backward()
            optimizer.step()
            step += 1
            if step % args.log_every == 0 or step == args.steps:
                elapsed = time.perf_counter() - start
                print(f"step {step}: loss {loss.item():.4f} ({elapsed:.1f} s)", flush=True)
            if step == args.steps:
                break


if __name__ == "__main__":
    main()
