"""Record the two traces `torchdoctor diff` is tested on: one tiny training job, without and
with a planted data-loading wait (the dataset sleeps per item). Run from the repository root:

    python tests/data/diff/record_traces.py

It writes tests/data/diff/job_plain.json.gz and job_data_wait.json.gz (a few KB each). The
traces are kept in the repository, so the tests read recorded data and start no profiler.
"""

from __future__ import annotations

import gzip
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader, Dataset

#: The planted wait per item: several times the tiny step's compute, so it is what changed.
WAIT_S = 0.02
HERE = Path(__file__).parent


class Items(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.wait_s:
            time.sleep(self.wait_s)
        return torch.randn(32), torch.randn(4)


def record(path: Path, wait_s: float) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Items(wait_s), batch_size=4, num_workers=0)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=8, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(str(raw)),
        ) as prof:
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                prof.step()
        with raw.open("rb") as src, gzip.open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)


def main() -> int:
    record(HERE / "job_plain.json.gz", 0.0)
    record(HERE / "job_data_wait.json.gz", WAIT_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
