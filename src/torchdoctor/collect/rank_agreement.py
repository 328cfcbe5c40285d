"""Whether the ranks of a torchrun job run one recipe: what each rank's injection did, compared.

Every rank of a job reads the same recipe, but what it does depends on the rank's own code
path: a script that builds its DataLoader or its DDP module on some ranks only, or with other
arguments on some, takes a knob on one rank and not on another, and the job then runs two
recipes at once. The ranks compare each knob's value and status (`recipe_view`); a tuned job
compares them at its ready boundary (collect/rank_control.py), `run --recipe` after the run
(`check_ranks_agree`). Torch-free: the CLI reads records with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchdoctor.collect.inject.record import INJECTION_STEM, InjectionRecord
from torchdoctor.core.errors import CollectError
from torchdoctor.core.rank import rank_of_file

#: One knob as the ranks compare it: name, value, status.
KnobView = tuple[str, Any, str]


def recipe_view(injection: dict[str, Any] | None) -> list[KnobView]:
    """What ranks must agree on: each knob of an `InjectionRecord` (JSON) with its value and
    status, in record order; empty without a recipe."""
    if not injection:
        return []
    return [
        (str(k["knob"]), k.get("value"), str(k.get("status"))) for k in injection.get("knobs", [])
    ]


def disagreement(views: list[list[KnobView]]) -> str | None:
    """One line naming the first knob the ranks' recipe views differ on, or None."""
    first = views[0]
    for rank, view in enumerate(views[1:], start=1):
        if view == first:
            continue
        mine, theirs = dict((k, (v, s)) for k, v, s in first), {k: (v, s) for k, v, s in view}
        for knob in sorted(set(mine) | set(theirs)):
            if mine.get(knob) != theirs.get(knob):
                return (
                    f"the ranks of the torchrun job disagree on the recipe: rank 0 has "
                    f"{_show(knob, mine.get(knob))}, rank {rank} {_show(knob, theirs.get(knob))} "
                    "(every rank must build the same DataLoaders, optimizer and model)"
                )
        return f"the ranks of the torchrun job disagree on the recipe (rank 0 and rank {rank})"
    return None


def _show(knob: str, entry: tuple[Any, str] | None) -> str:
    if entry is None:
        return f"no {knob}"
    value, status = entry
    return f"{knob}={value} {status.replace('_', ' ')}"


def check_ranks_agree(collect_dir: Path) -> None:
    """Raise `CollectError` (one line) when the ranks' injection records in `collect_dir`
    (`injection.rank<N>.json`) disagree on the recipe; nothing with fewer than two."""
    ranked = []
    for path in Path(collect_dir).glob(f"{INJECTION_STEM}.rank*.json"):
        rank = rank_of_file(path.name, INJECTION_STEM, ".json")
        if rank is not None:
            ranked.append((rank, InjectionRecord.read(path).to_json_dict()))
    if len(ranked) < 2:
        return
    reason = disagreement([recipe_view(record) for _, record in sorted(ranked)])
    if reason is not None:
        raise CollectError(reason, hint="make every rank build the same objects, then run again")
