"""Every knob of the catalogue owns all of its parts, consistently: a knob that forgets one
(how it applies, how it is written back, its rank in the ladder, whether a script can take
it), or that no rule prescribes without saying why, fails here, not in a stage that silently
skips it."""

from __future__ import annotations

import inspect
import re
from types import ModuleType

import pytest
from fixture_knob import FLUSH_DENORMAL, TAG_MODEL

import torchdoctor.knobs
from torchdoctor.diagnose.rules import RULE_MODULES, RULES, prescribed_by, prescribing
from torchdoctor.knobs import (
    CallEdit,
    DDPArgument,
    EditedCall,
    FSDPArgument,
    Knob,
    LoaderArgument,
    LoaderKeywordEdit,
    ModelLine,
    ModelTransform,
    NotWritten,
    OptimizerArgument,
    ProcessSetting,
    Snippet,
    StepSetting,
    TopLine,
    WrittenWith,
    catalogue,
    get_knob,
)

#: The catalogue, and the knobs a test declares as a new module would (fixture_knob.py).
KNOBS = (*catalogue(), FLUSH_DENORMAL, TAG_MODEL)
#: The injector families of the script injection (collect/inject) and the part each needs.
INJECTORS = {
    "dataloading": (LoaderArgument,),
    "optimizer": (OptimizerArgument, StepSetting),
    "model": (ModelTransform, StepSetting),
    "threads": (ProcessSetting,),
    "process": (ProcessSetting,),
    "ddp": (DDPArgument,),
    "fsdp": (FSDPArgument,),
}
#: knob name -> the name of the constant that declares it, as the package exports it
CONSTANTS = {v.name: k for k, v in vars(torchdoctor.knobs).items() if isinstance(v, Knob)}


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: k.name)
def test_a_knob_has_every_part(knob: Knob) -> None:
    assert knob.applies_to is not None, "how it applies to torch objects"
    assert knob.write_back is not None, "how it is written back (or NotWritten with why)"
    assert knob.ladder is not None, "its rank in the ladder"
    assert knob.script is not None, "whether a script takes it"


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: k.name)
def test_a_knob_takes_a_script_or_says_why_not(knob: Knob) -> None:
    script = knob.script
    assert script is not None
    assert (script.site is None) != (script.not_injectable is None)
    if script.not_injectable is not None:
        assert script.not_injectable.strip()
        # no script run records where it acted, so there is no place to write it back
        assert isinstance(knob.write_back, NotWritten)
        return
    assert script.site is not None and script.site.value in INJECTORS
    assert isinstance(knob.applies_to, INJECTORS[script.site.value])
    assert all(knob.domain.contains(v) for v in script.unchanged)


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: k.name)
def test_a_knob_is_written_back_the_way_it_applies(knob: Knob) -> None:
    part = knob.write_back
    if isinstance(part, LoaderKeywordEdit):
        assert isinstance(knob.applies_to, LoaderArgument)
    elif isinstance(part, CallEdit):
        assert isinstance(part.call, EditedCall)  # the patch writer has an editor of each
    elif isinstance(part, WrittenWith):
        assert get_knob(part.knob).write_back is not None and part.knob != knob.name
    elif isinstance(part, NotWritten):
        assert part.reason.strip()
    else:
        assert isinstance(part, ModelLine | TopLine | Snippet)
    if isinstance(knob.applies_to, LoaderArgument):
        assert isinstance(part, LoaderKeywordEdit)


def test_ladder_ranks_are_distinct() -> None:
    for rank in ("gpu", "cpu"):
        ranks = [getattr(k.ladder, rank) for k in KNOBS if k.ladder is not None]
        given = [r for r in ranks if r is not None]
        assert len(given) == len(set(given)), rank
    # every knob the ladder flips has a GPU rank; the batch search's knobs have none
    for knob in KNOBS:
        assert knob.ladder is not None
        assert (knob.ladder.gpu is None) == knob.ladder.batch_search, knob.name


def test_loader_arguments_are_ordered_and_placed_once() -> None:
    parts = [k.applies_to for k in KNOBS if isinstance(k.applies_to, LoaderArgument)]
    assert len({p.order for p in parts}) == len(parts)
    assert len({p.keyword for p in parts}) == len(parts)
    positions = [p.position for p in parts if p.position is not None]
    assert len(set(positions)) == len(positions)


def test_model_transforms_are_ordered_within_their_stage() -> None:
    acting = [
        k.applies_to
        for k in KNOBS
        if isinstance(k.applies_to, ModelTransform) and k.applies_to.apply is not None
    ]
    assert {p.stage for p in acting} == {"raw", "called"}
    for stage in ("raw", "called"):
        orders = [p.order for p in acting if p.stage == stage]
        assert len(orders) == len(set(orders)), stage


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: k.name)
def test_a_knob_is_prescribed_by_a_rule_or_says_why_none_is(knob: Knob) -> None:
    # knob -> rules: read back from the rules' prescriptions, never stated by the knob
    rules = prescribing(knob.name)
    assert set(rules) <= set(RULES)
    assert bool(rules) != bool((knob.no_rule or "").strip()), knob.name


@pytest.mark.parametrize("module", RULE_MODULES, ids=lambda m: str(m.RULE_ID))
def test_a_rule_prescribes_catalogue_knobs_by_their_constants(module: ModuleType) -> None:
    # rule -> knobs: the knob constants a rule holds are the catalogue's, and each is named in
    # its source as a prescription names it (`X.name`); a knob named any other way (a string)
    # would be missed by `prescribing`
    held = prescribed_by(module)
    assert all(get_knob(knob.name) is knob for knob in held)
    source = inspect.getsource(module)
    named = {name for name in CONSTANTS.values() if re.search(rf"\b{name}\.name\b", source)}
    assert named == {CONSTANTS[knob.name] for knob in held}
    for knob in held:
        assert module.RULE_ID in prescribing(knob.name)
