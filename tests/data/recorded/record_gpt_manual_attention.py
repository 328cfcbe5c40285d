"""Record gpt_manual_attention_cpu.json.gz: one profiled training step of the `gpt` workload
with attention written by hand (`attention="manual"`), shrunk to 2 layers of width 32 so the
trace stays small. CPU, record_shapes and with_flops as the collector's window records them.

    python tests/data/recorded/record_gpt_manual_attention.py
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils.data import DataLoader

from torchdoctor.workloads import get_workload

OUT = Path(__file__).resolve().parent / "gpt_manual_attention_cpu.json.gz"


def main() -> None:
    torch.manual_seed(0)
    wl = get_workload(
        "gpt", block=32, layers=2, heads=2, embd=32, characters=4096, attention="manual"
    )
    model = wl.build_model()
    opt = wl.build_optimizer(model.parameters(), "foreach")
    batches = iter(DataLoader(wl.build_dataset(0), batch_size=4))

    def step() -> None:
        x, y = next(batches)
        loss = wl.loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()  # warm-up outside the trace
    activities = [ProfilerActivity.CPU]
    with (
        profile(activities=activities, record_shapes=True, with_flops=True) as prof,
        record_function("ProfilerStep#0"),
    ):
        step()
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        with raw.open("rb") as src, gzip.open(OUT, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
