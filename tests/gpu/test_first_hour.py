"""The GPU tier: what a GPU user sees in the first hour, checked on a real GPU.

`pytest -m gpu -o addopts=""` on a machine with CUDA (skipped without it); minutes on one
H200. Each test is one of the GPU smoke checks (the GPU kit's smoke.sh) with its expectation
as an assertion. Every command runs in its own process, as a user's would, and all of them
share one cache folder, so the device's ceilings are measured once.
"""

from __future__ import annotations

import glob
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

TRAIN = str(Path(__file__).with_name("train_gpu.py"))


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("gpu-tier")
    return {
        **os.environ,
        "TORCHDOCTOR_CACHE_DIR": str(base / "cache"),
        "TORCHDOCTOR_RUNS_DIR": str(base / "runs"),
    }


def td(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "torchdoctor", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def load(path: Path | str) -> Any:
    return json.loads(Path(path).read_text())


def test_ceilings_are_near_the_datasheet_and_cached(env: dict[str, str]) -> None:
    from torchdoctor.analyze.devices import datasheet_ceilings

    ceilings = json.loads(td(env, "--json", "env", "--device", "cuda", "--refresh").stdout)[
        "ceilings"
    ]
    assert set(ceilings["peak_flops"]) >= {"float32", "float16", "bfloat16", "tf32"}
    sheet = datasheet_ceilings(ceilings["device_name"])
    if sheet is not None:  # a GPU the table knows: measured within 40..100% of its datasheet
        for dtype, flops in ceilings["peak_flops"].items():
            ref = sheet.peak_flops.get(dtype)
            if ref:
                assert 0.4 <= flops / ref <= 1.05, dtype
        ratio = ceilings["mem_bandwidth_bytes_per_s"] / sheet.mem_bandwidth_bytes_per_s
        assert 0.6 <= ratio <= 1.05
    assert not (ceilings.get("machine_load") or {}).get("disturbed")
    td(env, "--json", "env", "--device", "cuda", timeout=15)  # cached: no re-measurement


def test_workload_diagnosis_counts_only_device_syncs(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "diag"
    td(env, "--json", "diagnose", "mlp", "--device", "cuda", "--out", str(out))
    syncs = load(out / "analysis.json")["syncs"]
    # mlp's own pageable copies (batch and labels) at most, not AdamW's CPU counter reads.
    assert syncs["per_step"] <= 2.0
    assert syncs["host_scalar_reads"] > 0
    assert "aten::_local_scalar_dense" not in syncs["by_name"] or syncs["per_step"] <= 2.0
    assert syncs["tool_by_name"]  # the engine's own waits, listed apart
    rules = {f["rule_id"] for f in load(out / "diagnosis.json")["findings"]}
    assert "host_sync" not in rules


def test_script_diagnosis_sees_planted_syncs_and_none_of_its_own(
    env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "diag"
    script = [sys.executable, TRAIN, "--steps", "400", "--amp", "bf16", "--item", "2"]
    td(env, "--json", "diagnose", "--steps", "30", "--out", str(out), "--", *script)
    syncs = load(out / "analysis.json")["syncs"]
    assert 1.5 <= syncs["per_step"] <= 3.0  # the two planted .item() per step
    assert syncs["by_name"].get("cudaEventSynchronize", 0) <= 1  # the clock waits no more
    assert load(out / "profile.json")["timing_method"] == "cuda_events"


def test_fp16_grad_scaler_reads_are_not_the_scripts(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "diag"
    script = [sys.executable, TRAIN, "--steps", "400", "--amp", "fp16"]
    td(env, "--json", "diagnose", "--steps", "30", "--out", str(out), "--", *script)
    syncs = load(out / "analysis.json")["syncs"]
    assert syncs["grad_scaler_reads"] >= 1
    rules = {f["rule_id"] for f in load(out / "diagnosis.json")["findings"]}
    assert "host_sync" not in rules


def test_bench_waits_for_the_device_with_and_without_device(env: dict[str, str]) -> None:
    setup = "import torch; a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)"
    plain = json.loads(td(env, "--json", "bench", "-s", setup, "a @ a", "--budget", "4").stdout)
    cuda = json.loads(
        td(env, "--json", "bench", "-s", setup, "a @ a", "--budget", "4", "--device", "cuda").stdout
    )
    # An 8192^3 bf16 product takes ~1.6 ms on an H200: the launch alone is ~0.02 ms.
    assert plain["median"] > 2e-4 and cuda["median"] > 2e-4
    assert abs(plain["median"] / cuda["median"] - 1.0) < 0.10


def test_graph_flops_equal_eager_flops(env: dict[str, str], tmp_path: Path) -> None:
    args = ["--json", "profile", "mlp", "--device", "cuda", "--no-ceilings", "--param"]
    eager = json.loads(td(env, *args, "hidden=4096", "--set", "tf32=false").stdout)
    graphs = json.loads(td(env, *args, "hidden=4096", "--set", "cuda_graphs=true").stdout)
    assert graphs["profile"]["flops_per_step"] == pytest.approx(
        eager["profile"]["flops_per_step"], rel=0.01
    )


@pytest.mark.parametrize(
    "settings",
    [
        ["tf32=true", "compile=reduce-overhead"],
        ["cuda_graphs=true"],
        ["precision=fp16"],
        ["precision=bf16", "cudnn_benchmark=true"],
    ],
)
def test_gpu_knobs_run_and_report_their_peak(env: dict[str, str], settings: list[str]) -> None:
    args = [a for s in settings for a in ("--set", s)]
    result = json.loads(
        td(env, "--json", "run", "mlp", "--device", "cuda", "--steps", "60", *args).stdout
    )
    read = [x for x in result["losses"] if x is not None]
    assert read and all(math.isfinite(x) for x in read)
    memory = result["memory"]
    assert memory["cuda_peak_bytes"] > 0
    graphs = "cuda_graphs=true" in settings or "compile=reduce-overhead" in settings
    assert memory["cuda_graph_pools"] == graphs
    if graphs:  # the pool shows: the peak is not the few MB max_memory_allocated sees
        assert memory["cuda_peak_bytes"] >= memory["cuda_max_allocated_bytes"]


def test_tune_on_the_gpu_shows_the_bands_it_applied(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "tune"
    td(
        env, "--json", "tune", "mlp", "--device", "cuda", "--budget", "60s", "--knobs",
        "tf32,precision", "--no-batch-search", "--no-diagnose", "--out", str(out),
        timeout=150,
    )  # fmt: skip
    result = load(out / "tune.json")
    assert {b["safety"] for b in result["quality_bands"]} == {"exact", "close", "semantic"}
    for path in glob.glob(str(out / "trials" / "*.json")):
        assert load(path)["status"] not in ("crash", "error"), path


def test_torchrun_writes_one_profile_per_rank_and_none_of_its_own(
    env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "ddp"
    script = ["torchrun", "--standalone", "--nproc_per_node", "1", TRAIN, "--ddp", "--steps", "200"]
    td(env, "--json", "diagnose", "--steps", "20", "--out", str(out), "--", *script)
    profiles = sorted(
        Path(p).name for p in glob.glob(str(out / "collect" / "script_profile*.json"))
    )
    assert profiles == ["script_profile.rank0.json"]
    assert load(out / "collect" / "script_profile.rank0.json")["rank"] == 0


def test_a_script_holding_most_of_the_gpu_can_be_tuned(env: dict[str, str], tmp_path: Path) -> None:
    import torch

    share = round(0.55 * torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    out = tmp_path / "tune"
    script = [sys.executable, TRAIN, "--steps", "1000000", "--ballast-gb", str(share)]
    td(
        env, "--json", "tune", "--budget", "45s", "--knobs", "cudnn_benchmark", "--out",
        str(out), "--", *script, timeout=150,
    )  # fmt: skip
    for path in glob.glob(str(out / "trials" / "*.json")):
        assert load(path)["status"] != "oom", path  # two arms never live at once


def test_a_gpu_sized_cap_bounds_device_memory(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "tune"
    td(
        env, "--json", "tune", "mlp", "--device", "cuda", "--budget", "30s", "--max-memory",
        "2GiB", "--knobs", "tf32", "--no-batch-search", "--no-diagnose", "--out", str(out),
        timeout=120,
    )  # fmt: skip
    baseline = load(sorted(glob.glob(str(out / "trials" / "000-*.json")))[0])
    assert baseline["status"] == "ok"  # the mlp needs far less than 2 GiB of the GPU


def test_demo_quick_on_the_gpu_tunes_gpt2_small_with_gpu_knobs(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "demo", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TORCHDOCTOR_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "demo on a GPU: gpt2-small" in done.stderr
    result = load(out / "tune.json")
    assert result["workload"] == "gpt2-small" and result["device"].startswith("cuda")
    tried = [load(p).get("change") or {} for p in glob.glob(str(out / "trials" / "*.json"))]
    gpu_knobs = {"precision", "attention", "cuda_graphs", "compile", "tf32", "optimizer_impl"}
    assert any(set(change) & gpu_knobs for change in tried)
