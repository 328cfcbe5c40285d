from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from torchdoctor.core.env import Ceilings, cache_dir
from torchdoctor.core.errors import EnvError
from torchdoctor.measure import ceilings as ceilings_mod
from torchdoctor.measure.ceilings import get_ceilings, measure_ceilings

QUICK: dict[str, Any] = {
    "sizes": (32, 64, 128),
    "copy_bytes": 2**20,
    "run_time": 0.02,
    "warmup_s": 0.01,
}


def test_quick_measurement_has_plausible_numbers() -> None:
    steps: list[str] = []
    c = measure_ceilings("cpu", progress=steps.append, **QUICK)
    assert c.source == "measured" and c.device == "cpu"
    assert c.peak_flops["float32"] > 1e6  # any CPU does more than a MFLOP/s
    assert "bfloat16" in c.peak_flops
    assert c.mem_bandwidth_bytes_per_s > 1e6
    assert c.method["matmul_n"]["float32"] in QUICK["sizes"]
    assert steps[0] == "matmul float32" and steps[-1] == "memory bandwidth"


def test_flops_formula_uses_two_n_cubed(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pretend every matmul takes 1 ms whatever n: the probe fits, largest size is chosen.
    monkeypatch.setattr(ceilings_mod, "_matmul_seconds", lambda *_a, **_k: 1e-3)
    flops, n = ceilings_mod.measure_matmul_flops("cpu", "float32", sizes=(8, 16), run_time=0.1)
    assert n == 16 and flops == pytest.approx(2 * 16**3 / 1e-3)


def test_slow_dtype_stays_at_small_size(monkeypatch: pytest.MonkeyPatch) -> None:
    # Probe at n=8; doubling n costs 8x. Just under the limit after x8 fits, just over not.
    fits = 0.9 * ceilings_mod.MAX_MATMUL_CALL_S / 8
    monkeypatch.setattr(ceilings_mod, "_matmul_seconds", lambda *_a, **_k: fits)
    _, n = ceilings_mod.measure_matmul_flops("cpu", "bfloat16", sizes=(8, 16), run_time=0.1)
    assert n == 16
    too_slow = 1.1 * ceilings_mod.MAX_MATMUL_CALL_S / 8
    monkeypatch.setattr(ceilings_mod, "_matmul_seconds", lambda *_a, **_k: too_slow)
    _, n = ceilings_mod.measure_matmul_flops("cpu", "bfloat16", sizes=(8, 16), run_time=0.1)
    assert n == 8


def test_get_ceilings_caches_per_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = ceilings_mod.measure_ceilings

    def quick(device: str, **kwargs: Any) -> Ceilings:
        calls.append(device)
        return real(device, **QUICK)

    monkeypatch.setattr(ceilings_mod, "measure_ceilings", quick)
    for f in cache_dir().glob("ceilings-*.json") if cache_dir().exists() else []:
        f.unlink()
    first = get_ceilings()
    second = get_ceilings()
    assert calls == ["cpu"] and first == second
    third = get_ceilings(refresh=True)
    assert calls == ["cpu", "cpu"] and third.measured_at is not None
    # A truncated cache file is re-measured, not a crash.
    path = next(cache_dir().glob("ceilings-cpu-*.json"))
    path.write_text('{"schema": "torchdoctor/ceil')
    get_ceilings()
    assert len(calls) == 3 and Ceilings.read(path).device == "cpu"


def test_unavailable_or_unknown_device_is_env_error(tmp_path: Path) -> None:
    with pytest.raises(EnvError, match="unknown device"):
        get_ceilings(device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(EnvError, match="no CUDA device"):
            get_ceilings(device="cuda")


class _WarmingMatmul:
    """A modelled matmul on a fake clock: calls take `cold_s` until `warm_after` seconds
    have run (clock ramp, lazily built kernels), then `warm_s`; blocks listed in `hit` (by
    block index after the warm-up) are slowed by another process to `hit_s` per call."""

    def __init__(self, *, cold_s: float, warm_s: float, warm_after: float, hit_s: float) -> None:
        self.now = 0.0
        self.cold_s, self.warm_s, self.warm_after, self.hit_s = cold_s, warm_s, warm_after, hit_s
        self.slow = False

    def clock(self) -> float:
        return self.now

    def call(self) -> None:
        if self.slow:
            self.now += self.hit_s
        else:
            self.now += self.cold_s if self.now < self.warm_after else self.warm_s


def test_ceiling_is_the_sustained_warm_peak_not_a_cold_median() -> None:
    m = _WarmingMatmul(cold_s=2e-3, warm_s=1e-3, warm_after=0.8, hit_s=1.4e-3)
    blocks_seen = {"n": 0}
    start_of_timing: list[float] = []

    def sync() -> None:
        # Three of the five timed blocks (every block but the 2nd and 4th) run beside another
        # process: their median is 1.4 ms, the clean peak is 1 ms.
        if m.now >= 1.0 and not start_of_timing:
            start_of_timing.append(m.now)
        if start_of_timing:
            block = int((m.now - start_of_timing[0]) / 0.1)
            blocks_seen["n"] = max(blocks_seen["n"], block + 1)
            m.slow = block not in (1, 3)

    per_call = ceilings_mod.sustained_seconds_per_call(
        m.call, sync=sync, clock=m.clock, warmup_s=1.0, run_time=0.5, blocks=5
    )
    assert per_call == pytest.approx(1e-3, rel=0.02)
    # Warm-up ran past the cold period: no cold call was timed.
    assert start_of_timing and start_of_timing[0] >= m.warm_after


def test_matmul_flops_uses_the_sustained_best(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, float, float]] = []

    def fake(
        device: str, dtype: str, n: int, run_time: float, warmup_s: float, notes: object = None
    ) -> float:
        seen.append((n, run_time, warmup_s))
        return 1e-3 * (n / 8) ** 3

    monkeypatch.setattr(ceilings_mod, "_matmul_seconds", fake)
    flops, n = ceilings_mod.measure_matmul_flops(
        "cpu", "float32", sizes=(8, 16), run_time=1.0, warmup_s=1.0
    )
    assert n == 16 and flops == pytest.approx(2 * 16**3 / 8e-3)
    # The chosen size is timed with the full warm-up and run time, not the probe's.
    assert seen[-1] == (16, 1.0, 1.0)


def test_disturbed_ceilings_are_returned_labelled_and_not_cached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from load_fakes import ScriptedLoadProbe
    from torchdoctor.measure import load

    real = ceilings_mod.measure_ceilings
    monkeypatch.setattr(
        ceilings_mod, "measure_ceilings", lambda device, **_k: real(device, **QUICK)
    )
    monkeypatch.setattr(load, "default_load_probe", lambda: ScriptedLoadProbe.of([], then=True))
    for f in cache_dir().glob("ceilings-*.json") if cache_dir().exists() else []:
        f.unlink()
    busy = get_ceilings()
    assert busy.disturbed and busy.machine_load is not None
    assert "other processes used 1.50 of 2 CPU cores" in (busy.machine_load.warning or "")
    assert not list(cache_dir().glob("ceilings-cpu-*.json"))
    # Quiet again: measured anew (the disturbed figure was not kept) and cached.
    monkeypatch.setattr(load, "default_load_probe", lambda: ScriptedLoadProbe())
    quiet = get_ceilings()
    assert not quiet.disturbed and quiet.measured_at is not None
    assert Ceilings.read(next(cache_dir().glob("ceilings-cpu-*.json"))) == quiet


def test_cache_from_the_median_method_is_measured_again(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ceilings_mod.measure_ceilings
    calls: list[str] = []

    def quick(device: str, **_k: Any) -> Ceilings:
        calls.append(device)
        return real(device, **QUICK)

    monkeypatch.setattr(ceilings_mod, "measure_ceilings", quick)
    first = get_ceilings(refresh=True)
    path = next(cache_dir().glob("ceilings-cpu-*.json"))
    old = first.to_json_dict() | {"version": 1}
    old["method"] = {**old["method"], "statistic": "median"}
    del old["machine_load"]
    path.write_text(json.dumps(old))
    assert Ceilings.from_json_dict(old).machine_load is None  # version 1 still reads
    get_ceilings()
    assert calls == ["cpu", "cpu"]


def test_tf32_peak_on_ampere_and_later_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    assert ceilings_mod._dtypes_for("cuda") == ["float32", "float16", "bfloat16", "tf32"]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (7, 5))
    assert "tf32" not in ceilings_mod._dtypes_for("cuda")


def test_tf32_precision_is_set_for_the_measurement_and_restored() -> None:
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    with ceilings_mod._fp32_matmul_precision(True):
        assert matmul.fp32_precision == "tf32"
    with ceilings_mod._fp32_matmul_precision(False):
        assert matmul.fp32_precision == "ieee"
    assert matmul.fp32_precision == before


def test_gpu_sizes_reach_8192_where_memory_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ceilings_mod, "_matmul_seconds", lambda *_a, **_k: 1e-6)
    gib = 2**30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (40 * gib, 80 * gib))
    _, n = ceilings_mod.measure_matmul_flops(
        "cuda", "float16", sizes=ceilings_mod.GPU_MATMUL_SIZES, run_time=0.1
    )
    assert n == 8192
    # 3 x 8192^2 x 2 B = 384 MiB does not fit half of 0.5 GiB free; 4096 (96 MiB) does.
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (gib // 2, 80 * gib))
    _, n = ceilings_mod.measure_matmul_flops(
        "cuda", "float16", sizes=ceilings_mod.GPU_MATMUL_SIZES, run_time=0.1
    )
    assert n == 4096


@pytest.mark.requires_cuda
def test_real_gpu_ceilings_have_tf32_and_large_sizes() -> None:
    c = measure_ceilings("cuda", run_time=0.5, warmup_s=0.5)
    if torch.cuda.get_device_capability() >= (8, 0):
        assert c.peak_flops["tf32"] > c.peak_flops["float32"]
        assert c.method["matmul_n"]["float16"] == 8192
