"""A built-in workload takes what a script takes: `run WORKLOAD --recipe R [--vs-baseline]`,
and `--param` on every command that builds a workload (tune, diagnose and demo included). The
long work is faked: what is checked is what each command asks of the stages."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import torchdoctor.api.tuning as tuning
import torchdoctor.cli.demo as demo_mod
import torchdoctor.cli.tune as tune_cli
from cli_output import one_error_line
from torchdoctor.cli.main import main
from torchdoctor.tune import Confirmation, TuneConfig
from torchdoctor.tune.outcome import Outcome

# By their full names: on the package, `torchdoctor.diagnose` and `torchdoctor.tune` are the
# Python API's functions.
diagnose_mod = importlib.import_module("torchdoctor.diagnose")
tune_mod = importlib.import_module("torchdoctor.tune")

TINY = ["--param", "rows=64", "--param", "features=8", "--param", "hidden=16"]


def _recipe(tmp_path: Path, values: dict[str, Any]) -> Path:
    path = tmp_path / "best_recipe.json"
    path.write_text(json.dumps(values))
    return path


def test_run_a_workload_under_a_recipe_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = _recipe(tmp_path, {"threads": 1})
    argv = [
        "--json",
        "run",
        "mlp",
        "--param",
        "rows=512",
        "--recipe",
        str(recipe),
        "--set",
        "set_to_none=false",
    ]
    assert main([*argv, "--steps", "2", "--warmup", "1", "--device", "cpu", "--throughput"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["recipe"] == {"threads": 1, "set_to_none": False}  # --set adds to the file


def test_run_a_workload_vs_baseline_in_fresh_pairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[tuple[str, dict[str, Any], dict[str, Any]]] = []

    def recheck(workload: str, recipe: dict[str, Any], **kw: Any) -> Confirmation:
        asked.append((workload, recipe, kw))
        return Confirmation(
            key="run-vs-baseline:x", step=0, baseline_recipe={}, recipe=recipe, status="ok",
            outcome=Outcome.MEASURED, speedup=1.2, speedup_ci=(1.1, 1.3),
            rates=[1.2] * 3, baseline_rates=[1.0] * 3,
        )  # fmt: skip

    monkeypatch.setattr(tune_mod, "recheck_workload", recheck)
    out = tmp_path / "ab"
    recipe = _recipe(tmp_path, {"threads": 1})
    argv = ["--json", "run", "cnn", "--recipe", str(recipe), "--vs-baseline", "--pairs", "4"]
    assert main([*argv, "--device", "cpu", "--out", str(out)]) == 0
    ((workload, values, kw),) = asked
    assert workload == "cnn" and values == {"threads": 1}
    assert kw["pairs"] == 4 and kw["device"] == "cpu"
    assert json.loads(capsys.readouterr().out)["speedup"] == 1.2
    assert json.loads((out / "vs_baseline.json").read_text())["speedup_ci"] == [1.1, 1.3]


def test_run_a_workload_vs_baseline_refuses_what_its_workers_cannot_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tune_mod, "recheck_workload", lambda *a, **k: pytest.fail("ran"))
    recipe = _recipe(tmp_path, {"threads": 1})
    argv = ["run", "mlp", "--recipe", str(recipe), "--vs-baseline", *TINY]
    assert main(argv) == 2
    assert "--param cannot be honoured with --vs-baseline" in one_error_line(
        capsys.readouterr().err
    )


def _capture_tune(monkeypatch: pytest.MonkeyPatch) -> tuple[list[TuneConfig], list[Any]]:
    configs: list[TuneConfig] = []
    diagnosed: list[Any] = []

    def diagnose(workload: str, out: Path | None, **kw: Any) -> tuple[Path, list[str]]:
        diagnosed.append(kw.get("params"))
        return Path("run"), []

    def run(*, config: TuneConfig, out: Any, **kw: Any) -> SimpleNamespace:
        configs.append(config)
        return SimpleNamespace(run_dir="run")

    # `tune` reaches the stage through `torchdoctor.api.tune`; `demo` through its own steps.
    monkeypatch.setattr(tuning, "diagnosed_run_dir", diagnose)
    monkeypatch.setattr(tune_mod, "tune", run)
    monkeypatch.setattr(tune_cli, "finish_with_report", lambda result: None)
    monkeypatch.setattr(demo_mod, "diagnose_into_run_dir", diagnose)
    monkeypatch.setattr(demo_mod, "finish_with_report", lambda result: None)
    monkeypatch.setattr(demo_mod, "display_path", str)
    return configs, diagnosed


def test_tune_builds_the_workload_with_its_params(monkeypatch: pytest.MonkeyPatch) -> None:
    configs, diagnosed = _capture_tune(monkeypatch)
    assert main(["tune", "gpt", "--param", "attention=manual", "--device", "cpu"]) == 0
    assert main(["demo", "--param", "width=8", "--device", "cpu"]) == 0
    tune, demo = configs
    # The trial workers build the workload with them (procs.engine_session's `params`).
    assert tune.factory_options == {"params": {"attention": "manual"}}
    assert demo.factory_options == {"params": {"width": 8}}
    assert diagnosed == [{"attention": "manual"}, {"width": 8}]


def test_an_unknown_param_is_one_line_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    configs, _ = _capture_tune(monkeypatch)
    for command in (["tune", "mlp"], ["demo"]):
        assert main([*command, "--param", "no_such_param=1", "--device", "cpu"]) == 2
        assert "no_such_param" in one_error_line(capsys.readouterr().err) and configs == []


def test_diagnose_builds_the_workload_with_its_params(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Any] = []

    def examine(name: str, settings: dict[str, str], **kw: Any) -> SimpleNamespace:
        asked.append(kw["params"])
        return SimpleNamespace(job=None, diagnoses=[], memory=None, run_dir=Path("r"),
                               exit_code=None, error="stopped here")  # fmt: skip

    monkeypatch.setattr(diagnose_mod, "examine_workload", examine)
    assert main(["diagnose", "gpt", "--param", "attention=manual", "--device", "cpu"]) == 2
    assert asked == [{"attention": "manual"}]


def test_engine_workers_take_the_params() -> None:
    from torchdoctor.procs import engine_session

    session = engine_session("mlp", {}, device="cpu", seed=0, params={"rows": 64, "features": 8})
    assert session.workload.params["features"] == 8


def test_the_tuner_judges_what_applies_on_the_workload_its_params_build() -> None:
    # `tune gpt --param attention=manual`: switching the hand-written attention to SDPA is a
    # knob that applies to that model, not to the default one (fused already).
    from torchdoctor.tune.space import recipe_validator

    sdpa = {"attention": "sdpa"}
    assert recipe_validator("gpt", "cpu", params={"attention": "manual"})(sdpa) is None
    assert "already" in (recipe_validator("gpt", "cpu")(sdpa) or "")


def test_final_pairs_still_works_and_says_it_is_deprecated(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    configs, _ = _capture_tune(monkeypatch)
    assert main(["tune", "mlp", "--final-pairs", "4", "--no-diagnose", "--device", "cpu"]) == 0
    assert main(["tune", "mlp", "--pairs", "5", "--no-diagnose", "--device", "cpu"]) == 0
    assert [c.final_pairs for c in configs] == [4, 5]
    assert "--final-pairs is deprecated; use --pairs" in capsys.readouterr().err


def test_a_budget_reaches_the_study_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    configs, _ = _capture_tune(monkeypatch)
    for budget in ("90", "90s", "1.5m"):
        assert main(["tune", "mlp", "--budget", budget, "--no-diagnose", "--device", "cpu"]) == 0
    assert [c.budget_s for c in configs] == [90.0, 90.0, 90.0]


def test_the_api_tunes_a_workload_with_its_params(monkeypatch: pytest.MonkeyPatch) -> None:
    import torchdoctor

    seen: list[TuneConfig] = []
    monkeypatch.setattr(tune_mod, "tune", lambda *, config, out: seen.append(config))
    torchdoctor.tune("gpt", params={"attention": "manual"}, diagnose_first=False, device="cpu")
    assert seen[0].factory_options == {"params": {"attention": "manual"}}
