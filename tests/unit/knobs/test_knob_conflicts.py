"""Knob pairs that cannot run together are refused by the knob layer, before any trial."""

from __future__ import annotations

import dataclasses

import pytest

from torchdoctor.core.errors import KnobNotApplicable
from torchdoctor.knobs import Recipe, get_knob
from torchdoctor.knobs.base import ApplicabilityContext

#: An Ampere GPU: every CUDA knob applies on it on its own.
AMPERE = ApplicabilityContext(device="cuda", workload_name="gpt", cuda_capability=(8, 0))


@pytest.mark.parametrize("added", ["checkpointing", "cuda_graphs"])
def test_checkpointing_with_cuda_graphs_is_refused_with_the_rng_reason(added: str) -> None:
    # torch.utils.checkpoint reads the CUDA RNG state in forward, which raises during graph
    # capture (pytorch#83148): the pair would crash every trial that tried it.
    # Whichever the tuner adds to a recipe holding the other is refused, so no trial is
    # spent on the pair. The knob check sees the other one through the resolved settings.

    other = "cuda_graphs" if added == "checkpointing" else "checkpointing"
    ctx = dataclasses.replace(AMPERE, settings={other: True})
    with pytest.raises(KnobNotApplicable, match=r"RNG state.*graph capture") as info:
        get_knob(added).check_applicable(True, ctx)
    assert info.value.knob == added
    with pytest.raises(KnobNotApplicable, match=r"RNG state.*graph capture"):
        Recipe.parse([f"{added}=true", f"{other}=true"]).check_applicable(AMPERE)


@pytest.mark.parametrize("setting", ["checkpointing=true", "cuda_graphs=true"])
def test_each_alone_still_applies_on_cuda(setting: str) -> None:
    Recipe.parse([setting]).check_applicable(AMPERE)
