"""Shared test fixtures."""

from __future__ import annotations

import os
from typing import Any

import pytest

try:
    import torch

    _HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover - torch is a hard dependency
    _HAS_CUDA = False


def pytest_configure(config: pytest.Config) -> None:
    """With pytest-xdist's workers (`-n 2`, CI's fast tier) and a cache folder shared by the
    tiers (TORCHDOCTOR_TEST_CACHE_DIR), the machine's ceilings are measured here, once, in the
    controller before its workers start. Measured by a worker's first test instead, they would
    be read while the other worker's tests load the machine, and the studies, which run after
    the fast tier and alone, would read those figures from the shared cache."""
    shared = os.environ.get("TORCHDOCTOR_TEST_CACHE_DIR")
    workers = getattr(config.option, "numprocesses", None)
    if not shared or not workers or hasattr(config, "workerinput"):
        return
    from load_fakes import ScriptedLoadProbe
    from torchdoctor.measure import ceilings, load

    with pytest.MonkeyPatch.context() as patch:
        # As a test's own first reading would be (`_isolated_cache`, `_quiet_machine`).
        patch.setenv("TORCHDOCTOR_CACHE_DIR", shared)
        _brief_ceilings(patch)
        patch.setattr(load, "default_load_probe", lambda: ScriptedLoadProbe())
        ceilings.get_ceilings(device="cpu")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_cuda = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if ("requires_cuda" in item.keywords or "gpu" in item.keywords) and not _HAS_CUDA:
            item.add_marker(skip_cuda)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Keep the user cache (measured ceilings) out of the real home folder, and run folders
    made without --out out of the working tree, in tests.

    TORCHDOCTOR_TEST_CACHE_DIR names a cache folder shared by several pytest runs (.ci/run's
    two tiers): the machine's ceilings are then measured once (~30 s), as in one run."""
    base = tmp_path_factory.getbasetemp()
    cache = os.environ.get("TORCHDOCTOR_TEST_CACHE_DIR") or str(base / "td-cache")
    monkeypatch.setenv("TORCHDOCTOR_CACHE_DIR", cache)
    monkeypatch.setenv("TORCHDOCTOR_RUNS_DIR", str(base / "td-runs"))
    _brief_ceilings(monkeypatch)
    yield


#: The ceilings a test process measures for the cache: the real measurement (every dtype, the
#: copy buffer) on matrices up to 512 wide, with a shorter warm-up and timed window. An
#: emulated fp16 matmul (a CPU without fp16 units) takes seconds a call at 1024 and up, and was most
#: of the ~35 s the full measurement took. Tests read ceilings for the roofline and the
#: diagnosis, never for their value; the full measurement is `torchdoctor env`'s and the
#: ceilings benchmark's (benchmarks/bench_ceilings.py), and the zoo's diagnoses (a study)
#: measure their own before any test's cache is set.
TEST_CEILINGS_SIZES = (256, 512)
TEST_CEILINGS_WARMUP_S = 0.5
TEST_CEILINGS_RUN_TIME_S = 1.0


def _brief_ceilings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ceilings measured in a test's own process (the cache's first reader, in most runs) use
    the brief window; tests of the measurement pass their own settings, which win."""
    from torchdoctor.measure import ceilings

    full = ceilings.measure_ceilings

    def brief(device: str = "cpu", **kwargs: Any) -> Any:
        kwargs.setdefault("sizes", TEST_CEILINGS_SIZES)
        kwargs.setdefault("warmup_s", TEST_CEILINGS_WARMUP_S)
        kwargs.setdefault("run_time", TEST_CEILINGS_RUN_TIME_S)
        return full(device, **kwargs)

    monkeypatch.setattr(ceilings, "measure_ceilings", brief)


@pytest.fixture(autouse=True)
def _quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measurements in tests read a quiet machine: the real host's load (other test runs,
    other users) would otherwise decide what tests see. Tests of the load signal itself pass
    their own probe, or run the CLI in a subprocess where this does not apply."""
    from load_fakes import ScriptedLoadProbe
    from torchdoctor.measure import load

    monkeypatch.setattr(load, "default_load_probe", lambda: ScriptedLoadProbe())


@pytest.fixture(params=["old", "new"])
def v100_trace(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The synthetic V100 job's trace (tests/gpu_traces.py) in the 2021 schema without
    deviceProperties ("old", gzipped) and in today's schema ("new", plain JSON)."""
    from gpu_traces import write_v100_trace

    folder = tmp_path_factory.mktemp(f"v100_{request.param}")
    name = "trace.json.gz" if request.param == "old" else "trace.json"
    return write_v100_trace(folder / name, request.param)
