"""The cure as a patch, end to end: `torchdoctor run --recipe {"num_workers": 2}` on a copy of
a zoo script records where the injection acted; the patch built from that record applies with
`patch -p1` in the script's folder, the patched script runs with plain python, and the
DataLoader it builds by itself now has two workers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchdoctor.cli.main import main
from torchdoctor.collect.inject.record import InjectionRecord
from torchdoctor.tune.cure import BEST_RECIPE_PATCH, BEST_RECIPE_SNIPPETS, write_script_cure
from torchdoctor.tune.patch import build_patch

ZOO = Path(__file__).resolve().parents[1] / "zoo"
#: Small enough for a few seconds on a shared core; the decode cost is irrelevant here.
ARGS = ["--steps", "6", "--decode-iters", "200", "--workers", "0"]


def _run(root: Path, recipe: dict[str, object], out: Path) -> Path:
    recipe_file = root.parent / f"{out.name}.json"
    recipe_file.write_text(json.dumps(recipe))
    code = main(
        ["run", "--json", "--recipe", str(recipe_file), "--out", str(out), "--warmup", "1",
         "--", "python", str(root / "train_copy.py"), *ARGS]
    )  # fmt: skip
    assert code == 0
    return out / "collect"


@pytest.mark.skipif(shutil.which("patch") is None, reason="the patch binary is not installed")
@pytest.mark.study
@pytest.mark.untimed  # a recorded run's patch applied and run: behaviour, no timing
def test_patch_from_a_recorded_run_applies_and_sets_num_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    script = root / "train_copy.py"
    shutil.copy(ZOO / "data_loading_argparse.py", script)
    monkeypatch.chdir(root)
    recipe = {"num_workers": 2}

    collect = _run(root, recipe, tmp_path / "tuned")
    capsys.readouterr()
    record = InjectionRecord.read(collect / "injection.json")
    assert record.outcome("num_workers").status == "applied"  # type: ignore[union-attr]

    result = build_patch(recipe, record, root, script=script)
    assert [(e.knob, e.file) for e in result.edits] == [("num_workers", "train_copy.py")]
    assert result.snippets == []
    done = subprocess.run(
        ["patch", "-p1", "--batch"], input=result.diff, text=True, cwd=root, capture_output=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "num_workers=2)" in script.read_text()

    plain = subprocess.run(
        [sys.executable, str(script), *ARGS], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert plain.returncode == 0, plain.stderr
    assert "done after 6 steps" in plain.stdout

    # An empty recipe injects nothing: the profile shows the DataLoader the script builds by
    # itself, with --workers 0 on its command line.
    collect = _run(root, {}, tmp_path / "patched")
    capsys.readouterr()
    profile = json.loads((collect / "script_profile.json").read_text())
    assert [d["num_workers"] for d in profile["dataloaders"]] == [2]


@pytest.mark.skipif(shutil.which("patch") is None, reason="the patch binary is not installed")
def test_a_script_study_writes_its_recipe_as_a_patch_that_applies(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # What `tune -- python train.py` writes beside best_recipe.json once it keeps a change.
    root = tmp_path / "project"
    root.mkdir()
    # A script that prints as it starts, as training scripts do.
    source = (ZOO / "data_loading_argparse.py").read_text()
    (root / "train_copy.py").write_text('print("training starts")\n' + source)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    recipe = {"num_workers": 2, "precision": "bf16"}

    cure = write_script_cure(
        ["train_copy.py", *ARGS], module=False, cwd=root, recipe=recipe, run_dir=run_dir
    )

    assert cure is not None
    # The recording run's prints stay out of this process's output (`--json` is on stdout).
    printed = capfd.readouterr()
    assert "training starts" not in printed.out + printed.err
    assert "training starts" in (run_dir / "cure" / "script.log").read_text()
    assert [e.knob for e in cure.edits] == ["num_workers"]
    assert [s.knob for s in cure.snippets] == ["precision"]  # autocast has no line to edit
    assert "torch.autocast" in (run_dir / BEST_RECIPE_SNIPPETS).read_text()
    patch = (run_dir / BEST_RECIPE_PATCH).read_text()
    recorded = json.loads((run_dir / "cure" / "injection.json").read_text())

    # A study hands over the injection record of an arm that ran the recipe: the same patch
    # and snippets, and no launch of the script.
    def no_launch(*args: object, **kwargs: object) -> None:
        raise AssertionError("the script was launched again")

    monkeypatch.setattr("torchdoctor.procs.run_script", no_launch)
    again = tmp_path / "run_again"
    again.mkdir()
    cure_again = write_script_cure(
        ["train_copy.py", *ARGS],
        module=False,
        cwd=root,
        recipe=recipe,
        run_dir=again,
        recorded=recorded,
    )
    assert cure_again is not None and cure_again.edits == cure.edits
    assert (again / BEST_RECIPE_PATCH).read_text() == patch
    snippets = (run_dir / BEST_RECIPE_SNIPPETS).read_text()
    assert (again / BEST_RECIPE_SNIPPETS).read_text() == snippets
    assert json.loads((again / "cure" / "injection.json").read_text()) == recorded
    assert not (again / "cure" / "script.log").exists()

    subprocess.run(["patch", "-p1"], input=patch, text=True, cwd=root, check=True)
    assert "num_workers=2" in (root / "train_copy.py").read_text().replace(" ", "")
