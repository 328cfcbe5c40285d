from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from torchdoctor.core.env import Ceilings, cache_dir
from torchdoctor.core.errors import EnvError
from torchdoctor.measure import ceilings as ceilings_mod
from torchdoctor.measure.ceilings import get_ceilings, measure_ceilings

QUICK: dict[str, Any] = {"sizes": (32, 64, 128), "copy_bytes": 2**20, "run_time": 0.02}


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
