"""A CPU trace recorded here with a known planted cost: the breakdown must find it.

The dataset sleeps PLANTED_SLEEP_S per batch, inside ProfilerStep windows; the loop times each
fetch (`next` on the loader's iterator, the sleep and the loader's own work around it). The
DataLoader share of each step must equal that fetch's share within 5% (issue 4). The fetch, not
the sleep alone, is the truth: on a loaded host the process can lose the CPU inside the
loader's `__next__` outside the sleep (a fresh clone's CI once read 97.8% for the DataLoader
against a sleep-only share of 76.4%), and that time is the DataLoader's too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader, Dataset

from torchdoctor.analyze import analyze_trace

PLANTED_SLEEP_S = 0.03
TOLERANCE = 0.05  # issue 4: "attributes that cost within 5%"


class SleepyDataset(Dataset[torch.Tensor]):
    """Sleeps per item and keeps how long each sleep really took (a busy machine oversleeps)."""

    def __init__(self) -> None:
        self.slept_s: dict[int, float] = {}

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> torch.Tensor:
        start = time.perf_counter()
        time.sleep(PLANTED_SLEEP_S)
        self.slept_s[index] = time.perf_counter() - start
        return torch.randn(64)


def _record(path: Path) -> tuple[dict[int, float], dict[int, float]]:
    """Record the trace; return the real duration of the planted sleep and of the whole fetch
    per batch index."""
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    dataset = SleepyDataset()
    loader = DataLoader(dataset, batch_size=1, num_workers=0)
    fetched_s: dict[int, float] = {}
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=4, repeat=1),
        record_shapes=True,
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        batches = iter(loader)
        for step in range(7):
            start = time.perf_counter()
            batch = next(batches)
            fetched_s[step] = time.perf_counter() - start
            model(batch).sum().backward()
            prof.step()
    return dataset.slept_s, fetched_s


#: The trace, the planted sleep's real duration and the whole fetch's, per batch index.
Planted = tuple[Path, dict[int, float], dict[int, float]]


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Planted:
    path = tmp_path_factory.mktemp("planted") / "trace.json"
    slept_s, fetched_s = _record(path)
    return path, slept_s, fetched_s


def _expected_dataloader_pct(path: Path, fetched_s: dict[int, float]) -> float:
    """Ground truth from the recording itself: ProfilerStep#N fetches batch N (the loop fetches
    the next batch right after prof.step() opened the next step), so step N's DataLoader share
    is fetched_s[N] / duration(step N). Read straight from the JSON, independently of the
    analyzer."""
    events = json.loads(path.read_text())["traceEvents"]
    shares = [
        fetched_s[int(e["name"].split("#")[1])] / (e["dur"] * 1e-6) * 100
        for e in events
        if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
    ]
    return sum(shares) / len(shares)


def test_dataloader_cost_is_attributed_within_5_percent(planted: Planted) -> None:
    path, slept_s, fetched_s = planted
    assert min(slept_s.values()) >= PLANTED_SLEEP_S
    # Each fetch holds its planted sleep.
    assert all(fetched_s[i] >= slept_s[i] for i in slept_s)
    result = analyze_trace(path)
    assert result.device_timeline is None
    assert result.steps is not None and result.steps.basis == "host"
    assert result.steps.count >= 3
    assert result.step_breakdown is not None
    expected = _expected_dataloader_pct(path, fetched_s)
    assert result.step_breakdown["DataLoader"] == pytest.approx(expected, rel=TOLERANCE)
    # The rest of the step is the model: host operators, counted as CPU Exec.
    assert result.step_breakdown["CPU Exec"] > 0


def test_flops_estimated_from_recorded_shapes(planted: Planted) -> None:
    ops = {o.name: o for o in analyze_trace(planted[0]).ops}
    # One aten::addmm per Linear per step on a [1, 64] batch: Linear(64, 256) costs
    # 2 * 64 * 256 FLOPs and Linear(256, 8) 2 * 256 * 8, so each pair of calls their sum.
    addmm = ops["aten::addmm"]
    assert addmm.flops is not None and addmm.count % 2 == 0
    assert addmm.flops == (addmm.count // 2) * (2 * 64 * 256 + 2 * 256 * 8)
