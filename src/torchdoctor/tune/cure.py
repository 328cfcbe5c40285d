"""A script study's recipe written as changes to the user's own files.

`best_recipe.json` is what `torchdoctor run --recipe` injects; people also want the change
itself. One short run of the script under the recipe records where each knob acted (the
injection's `applied_at`, file:line), and `tune.patch.build_patch` turns that into a unified
diff that `patch -p1` applies in the folder the command ran in (`best_recipe.patch`) and
snippets for the knobs with no line to edit (`best_recipe_snippets.py`).
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
    command: list[str], *, module: bool, cwd: Path, recipe: dict[str, Any], run_dir: Path
) -> CurePatch | None:
    """Record where `recipe` acts in the script, then write its patch and snippets to `run_dir`.

    Returns None (and writes nothing) for an empty recipe or when the recording run fails: the
    recipe file stays the deliverable then.
    """
    if not recipe or not command:
        return None
    from torchdoctor.collect import INJECTION_STEM, InjectionRecord
    from torchdoctor.procs import run_script

    root = cwd.resolve()
    out = (run_dir / "cure").resolve()
    out.mkdir(parents=True, exist_ok=True)
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
        return None
    record_path = out / f"{INJECTION_STEM}.json"
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
