"""The memory-headroom rule gets the device's memory as its limit on a GPU run."""

from __future__ import annotations

from torchdoctor.diagnose import api
from torchdoctor.diagnose.hostinfo import cuda_memory_in
from torchdoctor.engine import run_workload
from torchdoctor.knobs import Recipe
from torchdoctor.workloads import get_workload

GIB = 2**30
ENV = {
    "torch_hip": None,
    "cuda_devices": [
        {"index": 0, "compute_capability": "8.0", "total_memory_bytes": 80 * GIB},
        {"index": 1, "compute_capability": "8.0", "total_memory_bytes": 40 * GIB},
    ],
}


def test_device_memory_from_the_environment_fingerprint() -> None:
    assert cuda_memory_in(ENV, "cuda:1") == 40 * GIB
    assert cuda_memory_in(ENV, "cuda") is None  # two sizes: which GPU ran is unknown
    assert cuda_memory_in(ENV, "cpu") is None
    assert cuda_memory_in(None, "cuda:0") is None


def test_gpu_run_near_its_device_memory_gets_the_headroom_finding() -> None:
    # A real (CPU) run, then read as the cuda:1 run it stands for: 38 of 40 GiB reserved.
    wl = get_workload("mlp", features=8, hidden=16, layers=1, rows=64, batch_size=16)
    run = run_workload(wl, Recipe(), steps=2, warmup_steps=0)
    memory = run.memory.model_copy(update={"cuda_max_reserved_bytes": 38 * GIB})
    gpu_run = run.model_copy(update={"device": "cuda:1", "memory": memory})
    diagnosis = api.diagnose_run(gpu_run, environment=ENV)
    found = {f.rule_id: f for f in diagnosis.findings}
    assert "memory_headroom" in found
    assert found["memory_headroom"].evidence["limit_bytes"] == 40 * GIB
