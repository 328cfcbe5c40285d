"""The best recipe as a ready-to-paste Python snippet.

It gives both forms a user needs: the recipe for `torchdoctor run`/the engine, and, per
changed knob, the code change that applies it to a hand-written training loop (each knob
declares its own `code_change`).
"""

from __future__ import annotations

import pprint
from typing import Any


def _code_change(name: str) -> str | None:
    try:
        from torchdoctor.knobs import get_knob

        return get_knob(name).code_change
    except Exception:  # a knob outside the catalogue (simulated studies) has no code change
        return None


def recipe_snippet(
    workload: str, best: dict[str, Any], baseline: dict[str, Any], *, command: str | None = None
) -> str:
    """The snippet of a workload's best recipe, or with `command` (a tuned script's
    `python train.py ARGS`) how to run the script with it and the changes to make by hand."""
    changed = {k: v for k, v in best.items() if baseline.get(k) != v}
    literal = pprint.pformat(dict(sorted(best.items())), sort_dicts=True, width=88)
    lines = (
        [
            f"# Best recipe found by `torchdoctor tune -- {command}`:",
            f"recipe = {literal}",
            "# Run the script with it, unmodified:",
            f"#   torchdoctor run --recipe best_recipe.json -- {command}",
            "",
            "# The same changes in the script's own code:",
        ]
        if command is not None
        else [
            f"# Best recipe found by `torchdoctor tune {workload}`.",
            "from torchdoctor.engine import prepare",
            "from torchdoctor.knobs import Recipe",
            "from torchdoctor.workloads import get_workload",
            "",
            f"recipe = Recipe.from_dict({literal})",
            f"session = prepare(get_workload({workload!r}), recipe)",
            "",
            "# The same changes in your own training loop:",
        ]
    )
    if not changed:
        lines.append("#   (none: no change was proven faster than the baseline)")
    for name, value in changed.items():
        how = _code_change(name)
        lines.append(f"#   {name} = {value!r}" + (f":  {how}" if how else ""))
    return "\n".join(lines) + "\n"
