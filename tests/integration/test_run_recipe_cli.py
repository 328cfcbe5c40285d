"""`torchdoctor run --recipe R -- python train.py`: a zoo script run unmodified with a recipe
injected in its own process; bad recipes are one line and exit code 2."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import torchdoctor
from cli_output import one_error_line
from torchdoctor.cli.main import main
from torchdoctor.cli.script_run import load_recipe_file
from torchdoctor.core.errors import KnobError, UsageError

ZOO = Path(__file__).resolve().parents[1] / "zoo"


def test_run_recipe_on_an_unmodified_zoo_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = ZOO / "compute_workers.py"
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    recipe = tmp_path / "best_recipe.json"
    # tune's best_recipe.json is a bare knob dict
    recipe.write_text(json.dumps(
        {"num_workers": 1, "batch_size": 16, "optimizer_impl": "for_loop", "pin_memory": True}
    ))  # fmt: skip
    out = tmp_path / "run"
    code = main(
        ["run", "--json", "--recipe", str(recipe), "--out", str(out), "--warmup", "1", "--",
         "python", str(script), "--steps", "6", "--workers", "0", "--batch-size", "32"]
    )  # fmt: skip
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "torchdoctor/script_run"
    assert data["steps"] >= 6 and data["steady_steps"] >= 3
    assert data["step_s_median"] > 0 and data["samples_per_s"] > 0
    knobs = {k["knob"]: k for k in data["injection"]["knobs"]}
    assert {k: v["status"] for k, v in knobs.items()} == {
        "batch_size": "applied",
        "num_workers": "applied",
        "pin_memory": "not_applied",
        "optimizer_impl": "applied",
    }
    assert "CUDA" in knobs["pin_memory"]["reason"]
    # what the script itself built, as the instrumentation saw it
    profile = json.loads((out / "collect" / "script_profile.json").read_text())
    loader = profile["dataloaders"][0]
    assert (loader["num_workers"], loader["batch_size"]) == (1, 16)
    assert profile["optimizer_impls"] == ["for_loop"]  # the script asks for foreach=True
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert hashlib.sha256(script.read_bytes()).hexdigest() == digest  # unmodified on disk


def test_recipe_file_forms(tmp_path: Path) -> None:
    tune_result = tmp_path / "tune.json"
    tune = {"schema": "torchdoctor/tune_result", "best_recipe": {"threads": 1}, "version": 1}
    tune_result.write_text(json.dumps(tune))
    assert load_recipe_file(tune_result) == {"threads": 1}
    (tmp_path / "best_recipe.json").write_text('{"compile": "default"}')
    assert load_recipe_file(tmp_path) == {"compile": "default"}  # a tune run folder
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(UsageError, match="holds no knob values"):
        load_recipe_file(tmp_path / "bad.json")
    (tmp_path / "range.json").write_text('{"num_workers": -1}')
    with pytest.raises(KnobError, match="invalid value -1"):
        load_recipe_file(tmp_path / "range.json")


def test_missing_recipe_file_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "--recipe", str(tmp_path / "nope.json"), "--", "python", "train.py"])
    assert code == 2
    assert "not found" in one_error_line(capsys.readouterr().err)


def test_unknown_knob_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = tmp_path / "r.json"
    recipe.write_text('{"workers": 2}')
    code = main(["run", "--recipe", str(recipe), "--", "python", str(ZOO / "compute_workers.py")])
    assert code == 2
    assert "unknown knob 'workers'" in one_error_line(capsys.readouterr().err)
    assert not list(tmp_path.glob("*run*"))


def test_vs_baseline_without_recipe_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    # Without --recipe a script runs as it is (tests/unit/cli/test_run_script_modes.py); the
    # A/B against it needs the recipe to compare.
    code = main(["run", "--vs-baseline", "--", "python", str(ZOO / "compute_workers.py")])
    assert code == 2
    assert "--recipe" in one_error_line(capsys.readouterr().err)


def test_run_recipe_on_a_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tinytrain.py").write_text(
        "import torch\n"
        "model = torch.nn.Linear(4, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(4):\n"
        "    loss = model(torch.randn(8, 4)).float().sum()\n"
        "    opt.zero_grad(set_to_none=False)\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    print(model(torch.randn(1, 4)).dtype)\n"
    )
    recipe = tmp_path / "r.json"
    recipe.write_text('{"precision": "bf16", "set_to_none": true}')
    # `-m` imports from the cwd; the child must still import this torchdoctor, not another
    monkeypatch.setenv("PYTHONPATH", str(Path(torchdoctor.__file__).resolve().parents[1]))
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--json", "--recipe", str(recipe), "--out", str(tmp_path / "run"),
                 "--", "python", "-m", "tinytrain"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    assert data["module"] is True and data["steps"] == 4
    assert data["injection"]["model"] == "Linear"
    assert {k["knob"]: k["status"] for k in data["injection"]["knobs"]} == {
        "precision": "applied",
        "set_to_none": "applied",
    }


PRINTING_SCRIPT = """
import torch
print({"lr": 0.1})  # a training script printing its settings, as they do
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6):
    loss = model(torch.randn(8, 4)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss", float(loss))
"""


def test_json_output_is_the_record_alone_when_the_script_prints(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "train.py"
    script.write_text(PRINTING_SCRIPT)
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"set_to_none": True}))
    code = main(
        ["run", "--json", "--recipe", str(recipe), "--out", str(tmp_path / "run"), "--",
         "python", str(script)]
    )  # fmt: skip
    captured = capfd.readouterr()
    assert code == 0
    assert json.loads(captured.out)["schema"] == "torchdoctor/script_run"
    assert "{'lr': 0.1}" in captured.err  # the script's own prints, on stderr


SAVE_EACH_EPOCH = Path(__file__).resolve().parents[1] / "scripts" / "save_each_epoch.py"
#: Each knob the injection applies on a CPU, grouped by the objects it acts on; compile
#: (inductor, tens of seconds on 2 cores) once.
SAVING_RECIPES = [
    {"precision": "bf16"},
    {"precision": "fp16"},
    {"compile": "default"},
    {"channels_last": True, "checkpointing": True},
    {"optimizer_impl": "foreach", "set_to_none": False, "threads": 1},
    {"num_workers": 1, "persistent_workers": True, "prefetch_factor": 4, "batch_size": 4},
]


@pytest.mark.parametrize("recipe", SAVING_RECIPES, ids=lambda r: ",".join(r))
def test_a_script_that_saves_its_whole_model_trains_on_under_each_knob(
    recipe: dict[str, object], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    recipe_file = tmp_path / "recipe.json"
    recipe_file.write_text(json.dumps(recipe))
    saved = tmp_path / "model.pt"
    code = main(
        ["run", "--json", "--recipe", str(recipe_file), "--out", str(tmp_path / "run"), "--",
         "python", str(SAVE_EACH_EPOCH), "--epochs", "2", "--save", str(saved)]
    )  # fmt: skip
    captured = capfd.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    statuses = {k["knob"]: k["status"] for k in data["injection"]["knobs"]}
    assert statuses == dict.fromkeys(recipe, "applied")
    assert "loaded Net (32, 4) torch.float32" in captured.err  # the script's own load
    # the saved model is the script's own: it loads where torchdoctor never ran
    check = (
        # the script saved `__main__.Net`: this `__main__` defines it too
        "import sys, torch; sys.path.insert(0, sys.argv[2]); from save_each_epoch import Net; "
        "m = torch.load(sys.argv[1], weights_only=False); "
        "assert 'forward' not in vars(m); assert not m._forward_hooks; "
        "assert not any('torchdoctor' in type(v).__module__ for v in vars(m).values())"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(
        [sys.executable, "-c", check, str(saved), str(SAVE_EACH_EPOCH.parent)], check=True, env=env
    )
