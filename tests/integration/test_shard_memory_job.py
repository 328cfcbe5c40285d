"""Memory per rank under FSDP2, estimated without materialising the model, against the peak
of a real 2-rank gloo FSDP2 step (studies tier: two spawned ranks take tens of seconds on a
loaded 2-core machine)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from sharded_job import spawn_ranks
from torchdoctor.analyze import estimate_shards
from torchdoctor.workloads import get_workload

pytestmark = pytest.mark.skipif(
    not torch.distributed.is_available(), reason="this torch build has no torch.distributed"
)

GPT = {"layers": 2, "embd": 64, "heads": 2, "block": 32, "characters": 4096}
BATCH = 4
#: The claim's tolerance (benchmarks/bench_shard_memory.py): within 10% of the measured peak.
TOLERANCE = 0.10


def _rank(rank: int, out: str) -> None:
    from torchdoctor.collect.shard_memory import measure_sharded_step

    peak = measure_sharded_step(get_workload("gpt", **GPT), BATCH)
    Path(f"{out}.{rank}").write_text(json.dumps(peak))


@pytest.mark.study
@pytest.mark.untimed  # holds a memory count to arithmetic, no timing
def test_two_ranks_peak_where_the_estimate_says(tmp_path: Path) -> None:
    out = str(tmp_path / "peak")
    spawn_ranks(_rank, out)
    peaks: list[dict[str, Any]] = [json.loads(Path(f"{out}.{r}").read_text()) for r in (0, 1)]
    plan = estimate_shards(get_workload("gpt", **GPT), [2], batch=BATCH)
    rank = plan.ranks[0]
    for peak in peaks:
        # the sharded owners are the arithmetic's to the byte; the peak within the claim
        assert peak["Sharded Param"] == rank.parameters_bytes
        assert peak["OptState"] == rank.optimizer_state_bytes
        assert abs(rank.peak_bytes / peak["Total"] - 1) <= TOLERANCE, (rank, peak)
