"""The Python API: `torchdoctor.diagnose/tune/run(...)` return the records the commands print,
and `import torchdoctor` stays light (no torch, no scipy) until one is called."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import torchdoctor
from torchdoctor.api import _command, parse_command
from torchdoctor.core.errors import UsageError
from torchdoctor.diagnose import Diagnosis
from torchdoctor.engine import RunResult
from torchdoctor.tune import TuneConfig

TRACE = Path(__file__).parents[1] / "data" / "diff" / "job_data_wait.json.gz"


def test_import_stays_light_and_the_names_are_there() -> None:
    code = (
        "import sys, torchdoctor\n"
        "print(sorted(m for m in ('torch', 'scipy', 'optuna') if m in sys.modules))\n"
        "print(callable(torchdoctor.run))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "True"]
    assert callable(torchdoctor.diagnose) and callable(torchdoctor.tune)
    assert {"diagnose", "tune", "run", "watch"} <= set(torchdoctor.__all__)


def test_diagnose_returns_what_the_command_prints(tmp_path: Path) -> None:
    diag = torchdoctor.diagnose(TRACE, out=tmp_path / "api")
    assert isinstance(diag, Diagnosis) and diag.primary_bottleneck == "data_loading"
    # What `torchdoctor diagnose --json TRACE` prints is the record it writes in its folder.
    assert Diagnosis.read(tmp_path / "api" / "diagnosis.json") == diag


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (["python", "train.py", "--epochs", "1"], (["train.py", "--epochs", "1"], False)),
        ("python -m pkg.train --x", (["pkg.train", "--x"], True)),
        ("train.py", (["train.py"], False)),
        (Path("a/train.py"), (["a/train.py"], False)),
        ("cnn", None),
        ("path/to/file.py:factory", None),
        ("trace.json.gz", None),
        (
            "torchrun --nproc_per_node 2 train.py",
            (["torch.distributed.run", "--nproc_per_node", "2", "train.py"], True),
        ),
    ],
)
def test_a_target_is_a_script_a_workload_or_a_trace(target: Any, expected: Any) -> None:
    assert _command(target) == expected


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["python", "train.py", "a"], (["train.py", "a"], False)),
        (["train.py"], (["train.py"], False)),
        (["python3", "-m", "pkg.train", "--x"], (["pkg.train", "--x"], True)),
        (
            ["torchrun", "--standalone", "t.py"],
            (["torch.distributed.run", "--standalone", "t.py"], True),
        ),
        (["/usr/bin/torchrun", "t.py"], (["torch.distributed.run", "t.py"], True)),
        (
            ["python", "-m", "torch.distributed.run", "t.py"],
            (["torch.distributed.run", "t.py"], True),
        ),
    ],
)
def test_one_parser_reads_every_command_line(words: list[str], expected: Any) -> None:
    assert parse_command(words) == expected


@pytest.mark.parametrize(
    ("words", "said"),
    [([], "no command"), (["python"], "no script"), (["python", "-m"], "-m needs")],
)
def test_a_command_line_that_runs_nothing_is_a_usage_error(words: list[str], said: str) -> None:
    with pytest.raises(UsageError, match=said):
        parse_command(words)


def test_tune_builds_the_config_the_command_builds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[TuneConfig] = []
    stage = importlib.import_module("torchdoctor.tune")  # the package's `tune` is the function
    monkeypatch.setattr(stage, "tune", lambda *, config, out: seen.append(config))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("pass\n")  # the study checks its script exists
    script = ["python", "train.py", "--lr", "1"]
    torchdoctor.tune(script, budget_s=60, recipe={"threads": 1}, diagnose_first=False)
    torchdoctor.tune("mlp", budget_s=90, knobs=["threads"], diagnose_first=False)
    # The memory objective: no diagnosis first (its ladder's order is its own), the cap kept.
    torchdoctor.tune("mlp", objective="fit", max_memory_fraction=0.75, out=tmp_path / "fit")
    scripted, workload, fit = seen
    assert scripted.command == ["train.py", "--lr", "1"] and scripted.workload == "script:train"
    assert scripted.budget_s == 60 and scripted.baseline_recipe == {"threads": 1}
    assert not scripted.search_batch
    assert workload.workload == "mlp" and workload.knobs == ["threads"]
    assert workload.objective == "throughput" and workload.max_memory_bytes is None
    assert fit.objective == "fit" and fit.max_memory_fraction == 0.75 and fit.prescribed == []
    assert not (tmp_path / "fit").exists()


def test_run_returns_a_run_result_and_reads_a_recipe_file(tmp_path: Path) -> None:
    recipe = tmp_path / "best_recipe.json"
    recipe.write_text('{"threads": 1}')
    result = torchdoctor.run(
        "mlp", recipe=recipe, steps=4, warmup=1, device="cpu", measure_phases=False
    )
    assert isinstance(result, RunResult) and result.recipe == {"threads": 1}
    assert len(result.steps) >= 4 and result.samples_per_s > 0
    # A script is run too (tests/unit/test_api_run_recheck.py); a workload's keyword is refused.
    with pytest.raises(UsageError, match="device= cannot be honoured for a script"):
        torchdoctor.run("python train.py", device="cpu")


def test_settings_is_the_old_name_of_recipe(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[TuneConfig] = []
    stage = importlib.import_module("torchdoctor.tune")
    monkeypatch.setattr(stage, "tune", lambda *, config, out: seen.append(config))
    with pytest.warns(DeprecationWarning, match=r"tune\(settings=\.\.\.\) is deprecated"):
        torchdoctor.tune("mlp", settings={"threads": 1}, diagnose_first=False, device="cpu")
    assert seen[0].baseline_recipe == {"threads": 1}
    with pytest.raises(UsageError, match="both settings= and recipe="):
        torchdoctor.tune("mlp", settings={"threads": 1}, recipe={"threads": 2})


def test_a_stage_module_imports_by_its_full_name_after_its_function_was_read() -> None:
    # `torchdoctor.tune` is the function; `import torchdoctor.tune.storage as storage` still
    # gives the stage's module, whether the function was read first or not.
    import subprocess
    import sys

    code = (
        "import torchdoctor\n"
        "assert callable(torchdoctor.tune) and torchdoctor.tune.__doc__\n"
        "import torchdoctor.tune.storage as storage\n"
        "import torchdoctor.diagnose.examine as examine\n"
        "print(storage.__name__, examine.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["torchdoctor.tune.storage", "torchdoctor.diagnose.examine"], (
        done.stderr
    )
