"""Memory per rank under FSDP2, estimated without materialising the model, against the peak
of a real 2-rank gloo FSDP2 step (studies tier: two spawned ranks take tens of seconds on a
loaded 2-core machine)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp

from torchdoctor.analyze import estimate_shards
from torchdoctor.workloads import get_workload

pytestmark = pytest.mark.skipif(
    not torch.distributed.is_available(), reason="this torch build has no torch.distributed"
)

GPT = {"layers": 2, "embd": 64, "heads": 2, "block": 32, "characters": 4096}
BATCH = 4
#: The claim's tolerance (benchmarks/bench_shard_memory.py): within 10% of the measured peak.
TOLERANCE = 0.10


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    from torchdoctor.collect.shard_memory import measure_sharded_step

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        peak = measure_sharded_step(get_workload("gpt", **GPT), BATCH)
        Path(f"{out}.{rank}").write_text(json.dumps(peak))
    finally:
        dist.destroy_process_group()


@pytest.mark.study
@pytest.mark.untimed  # holds a memory count to arithmetic, no timing
def test_two_ranks_peak_where_the_estimate_says(tmp_path: Path) -> None:
    out = str(tmp_path / "peak")
    mp.spawn(_rank, args=(2, _free_port(), out), nprocs=2, join=True)
    peaks: list[dict[str, Any]] = [json.loads(Path(f"{out}.{r}").read_text()) for r in (0, 1)]
    plan = estimate_shards(get_workload("gpt", **GPT), [2], batch=BATCH)
    rank = plan.ranks[0]
    for peak in peaks:
        # the sharded owners are the arithmetic's to the byte; the peak within the claim
        assert peak["Sharded Param"] == rank.parameters_bytes
        assert peak["OptState"] == rank.optimizer_state_bytes
        assert abs(rank.peak_bytes / peak["Total"] - 1) <= TOLERANCE, (rank, peak)
