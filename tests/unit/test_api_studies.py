"""`torchdoctor.scale`, `serve` and `demo` plan what their commands plan (the same study from
the same options), refuse bad input as they do, and the API's warnings print as the
commands' `warning:` lines. The studies themselves are replaced at the stage: nothing is
launched, served or tuned."""

from __future__ import annotations

import importlib
import io
import warnings
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import torchdoctor
import torchdoctor.cli.state as cli_state
from torchdoctor.api import TorchDoctorWarning
from torchdoctor.cli.main import main
from torchdoctor.core.errors import EnvError, ScaleError, TuneError, UsageError
from torchdoctor.core.rundir import read_manifest

# By their full names: `torchdoctor.scale`, `serve` and `tune` on the package are functions.
SCALE = importlib.import_module("torchdoctor.scale")
SERVE = importlib.import_module("torchdoctor.serve")
TUNE = importlib.import_module("torchdoctor.tune")


class Stopped(ScaleError):
    """Raised by a stage replaced in a test, once it has seen what it was given."""


def test_scale_plans_the_study_the_command_plans(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plans: list[Any] = []

    def run_worlds(plan: Any, run_dir: Path, progress: Any) -> None:
        plans.append(plan)
        raise Stopped("stopped by the test")

    monkeypatch.setattr(SCALE, "run_worlds", run_worlds)
    with pytest.raises(Stopped):
        torchdoctor.scale("mlp", nproc=[1, 2], backend="gloo", steps=12, out=tmp_path / "api")
    args = ["scale", "mlp", "--nproc", "1,2", "--backend", "gloo", "--steps", "12"]
    assert main([*args, "--out", str(tmp_path / "cli")]) == 2
    api, cli = plans
    assert api == cli and api.steps == 12 and list(api.nprocs) == [1, 2]
    # Both folders are marked failed with why.
    for name in ("api", "cli"):
        manifest = read_manifest(tmp_path / name)
        assert manifest.status == "failed" and "stopped by the test" in (manifest.error or "")


def test_scale_refuses_a_bandwidth_that_is_not_positive() -> None:
    with pytest.raises(UsageError, match="positive GB/s"):
        torchdoctor.scale("mlp", bandwidth=(10.0, 0.0))


def test_serve_plans_what_the_command_plans(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plans: list[Any] = []

    def serve_target(target: Any, plan: Any, **kwargs: Any) -> Any:
        plans.append(plan)
        raise Stopped("stopped by the test")

    monkeypatch.setattr(SERVE, "serve_target", serve_target)
    with pytest.raises(Stopped):
        torchdoctor.serve(
            "mlp", sla="p99<=5ms", max_batch=8, budget_s=2.0, device="cpu", out=tmp_path / "a"
        )
    args = ["serve", "mlp", "--sla", "p99<=5ms", "--max-batch", "8", "--budget", "2s"]
    assert main([*args, "--device", "cpu", "--out", str(tmp_path / "c")]) == 2
    api, cli = plans
    assert api == cli and api.max_batch_size == 8 and api.latency_budget_s == 2.0


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"search": "random"}, "--search 'random' is not one of binary, sweep"),
        ({"arrivals": "burst"}, "--arrivals 'burst' is not one of"),
        ({"budget_s": 0.1}, "is under 0.5 s"),
        ({"variants": ["compile", "compile"]}, "names a variant twice"),
    ],
)
def test_serve_refuses_what_the_command_refuses(options: dict[str, Any], said: str) -> None:
    with pytest.raises(UsageError, match=said.replace("(", r"\(")):
        torchdoctor.serve("mlp", device="cpu", **options)


def test_demo_tunes_the_study_the_command_tunes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    configs: list[Any] = []

    def tune(*, config: Any, out: Path, **hooks: Any) -> Any:
        configs.append(config)
        raise TuneError("stopped by the test")

    monkeypatch.setattr(TUNE, "diagnose_before_tuning", lambda *a, **k: ["num_workers"])
    monkeypatch.setattr(TUNE, "tune", tune)
    with pytest.raises(TuneError):
        torchdoctor.demo(quick=True, device="cpu", out=tmp_path / "api")
    assert main(["demo", "--quick", "--device", "cpu", "--out", str(tmp_path / "cli")]) == 2
    api, cli = configs
    assert api == cli and api.prescribed == ["num_workers"] and api.notes


def test_the_apis_warning_is_the_commands_warning_line(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(cli_state, "err_console", Console(file=err, width=200, color_system=None))
    with cli_state.showing_warnings():
        warnings.warn("ceilings unavailable: no CUDA device", TorchDoctorWarning, stacklevel=1)
    assert err.getvalue().splitlines() == ["warning: ceilings unavailable: no CUDA device"]


def test_a_profile_without_ceilings_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchdoctor.api import tools

    measure = importlib.import_module("torchdoctor.measure")

    def no_ceilings(**kwargs: Any) -> Any:
        raise EnvError("no CUDA device")

    monkeypatch.setattr(measure, "get_ceilings", no_ceilings)
    with pytest.warns(TorchDoctorWarning, match="ceilings unavailable: no CUDA device"):
        assert tools._ceilings("cuda") is None


def test_memory_check_edge_needs_a_budget() -> None:
    with pytest.raises(UsageError, match="--check-edge needs a budget"):
        torchdoctor.memory("mlp", check_edge=True, device="cpu")
