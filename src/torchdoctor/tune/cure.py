"""A script study's recipe written as changes to the user's own files.

`best_recipe.json` is what `torchdoctor run --recipe` injects; people also want the change
itself. Where each knob acted (the injection's `applied_at`, file:line) is in the injection
record of a launch of the script under the recipe, and `tune.patch.build_patch` turns that
into a unified diff that `patch -p1` applies in the folder the command ran in
(`best_recipe.patch`) and snippets for the knobs with no line to edit
(`best_recipe_snippets.py`). A study hands over the record of an arm that ran the recipe
(`ScriptArms.injection_of`); without one (a study replayed from its storage) one short run of
the script records it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Final

from torchdoctor.core.errors import TorchDoctorError
from torchdoctor.core.io import atomic_write_text
from torchdoctor.tune.patch import CurePatch, build_patch

BEST_RECIPE_PATCH: Final = "best_recipe.patch"
BEST_RECIPE_SNIPPETS: Final = "best_recipe_snippets.py"
#: Steps of the recording run: knobs act at construction (DataLoader, optimizer) or at the
#: model's first training call, all within the first step; two more let the script reach
#: its loop's steady code.
CURE_RUN_STEPS: Final = 3


def write_script_cure(
    command: list[str],
    *,
    module: bool,
    cwd: Path,
    recipe: dict[str, Any],
    run_dir: Path,
    recorded: dict[str, Any] | None = None,
) -> CurePatch | None:
    """Write the patch and snippets of `recipe` to `run_dir`, from where it acts in the script:
    `recorded` (the injection record of a launch under `recipe`), else a recording run's.

    Returns None (and writes nothing) for an empty recipe or when the recording run fails: the
    recipe file stays the deliverable then.
    """
    if not recipe or not command:
        return None
    from torchdoctor.collect import INJECTION_STEM, InjectionRecord

    root = cwd.resolve()
    out = (run_dir / "cure").resolve()
    out.mkdir(parents=True, exist_ok=True)
    record_path = out / f"{INJECTION_STEM}.json"
    if recorded is not None:
        # The record the patch is built from, kept as a recording run would have left it.
        InjectionRecord.from_json_dict(recorded, source="the arm's injection").write(record_path)
    else:
        _record(command, module=module, root=root, recipe=recipe, out=out)
    if not record_path.is_file():
        return None
    record = InjectionRecord.read(record_path)
    script = None if module else root / command[0]
    cure = build_patch(recipe, record, root, script=script)
    if cure.diff:
        atomic_write_text(run_dir / BEST_RECIPE_PATCH, cure.diff)
    if cure.snippets:
        atomic_write_text(run_dir / BEST_RECIPE_SNIPPETS, cure.snippet_text() + "\n")
    return cure


def _record(
    command: list[str], *, module: bool, root: Path, recipe: dict[str, Any], out: Path
) -> None:
    """One short run of the script under `recipe`, its injection record left in `out`; a
    run that fails leaves none."""
    from torchdoctor.procs import run_script

    try:
        # The script's relative paths (data, configs) are relative to the folder it ran in.
        with contextlib.chdir(root):
            run_script(
                list(command),
                module=module,
                steps=CURE_RUN_STEPS,
                warmup=1,
                profile_steps=0,
                out_dir=out,
                recipe=dict(recipe),
                output=out / "script.log",
            )
    except TorchDoctorError:
        return
