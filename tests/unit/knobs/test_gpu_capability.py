"""bf16 and TF32 need an Ampere-or-newer GPU; checked with fake capabilities (no GPU here)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
import torch

from torchdoctor.core.errors import KnobNotApplicable
from torchdoctor.knobs import Recipe, get_knob
from torchdoctor.knobs.base import ApplicabilityContext, cuda_capability_of
from torchdoctor.knobs.recipe import context_for
from torchdoctor.tune.space import recipe_validator
from torchdoctor.workloads import get_workload

BF16_ON_SM75 = (
    "bf16 needs a GPU with native bfloat16 (compute capability 8.0+, Ampere or newer); "
    "this GPU is sm_75: use fp16 (with its GradScaler)"
)
TF32_ON_SM70 = (
    "TF32 needs compute capability 8.0+ (Ampere or newer); "
    "this GPU is sm_70, whose fp32 matmuls it would not change"
)


def _cuda(capability: tuple[int, int] | None) -> ApplicabilityContext:
    return ApplicabilityContext(device="cuda:0", cuda_capability=capability)


def _reason(knob: str, value: object, ctx: ApplicabilityContext) -> str | None:
    try:
        get_knob(knob).check_applicable(value, ctx)  # type: ignore[arg-type]
    except KnobNotApplicable as exc:
        assert exc.knob == knob
        return exc.reason
    return None


def test_bf16_rejected_before_ampere_with_a_reason_that_teaches() -> None:
    assert _reason("precision", "bf16", _cuda((7, 5))) == BF16_ON_SM75
    with pytest.raises(KnobNotApplicable, match=r"'precision=bf16' does not apply here: bf16"):
        get_knob("precision").check_applicable("bf16", _cuda((7, 0)))


def test_bf16_accepted_from_ampere_and_fp16_everywhere() -> None:
    for capability in [(8, 0), (8, 6), (9, 0), (12, 0)]:
        assert _reason("precision", "bf16", _cuda(capability)) is None
    for capability in [(7, 0), (7, 5), (8, 0)]:
        assert _reason("precision", "fp16", _cuda(capability)) is None
    # The default changes nothing, so it applies whatever the GPU.
    assert _reason("precision", "fp32", _cuda((7, 0))) is None


def test_tf32_rejected_before_ampere_accepted_from_it() -> None:
    assert _reason("tf32", True, _cuda((7, 0))) == TF32_ON_SM70
    assert _reason("tf32", True, _cuda((8, 0))) is None
    assert _reason("tf32", False, _cuda((7, 0))) is None  # the default
    # Off CUDA the reason stays the CUDA-only one.
    assert "only acts on CUDA devices" in str(_reason("tf32", True, ApplicabilityContext("cpu")))


def test_unknown_capability_refuses_nothing() -> None:
    assert _reason("precision", "bf16", _cuda(None)) is None
    assert _reason("tf32", True, _cuda(None)) is None


def test_bf16_on_cpu_stays_applicable() -> None:
    assert _reason("precision", "bf16", ApplicabilityContext("cpu")) is None
    # A capability on a CPU context (never filled by context_for) does not matter either.
    assert _reason("precision", "bf16", ApplicabilityContext("cpu", cuda_capability=(7, 0))) is None


def test_recipe_check_keeps_the_capability_in_its_full_context() -> None:
    ctx = _cuda((7, 5))
    with pytest.raises(KnobNotApplicable) as info:
        Recipe({"precision": "bf16", "num_workers": 2}).check_applicable(ctx)
    assert info.value.reason == BF16_ON_SM75
    Recipe({"precision": "bf16"}).check_applicable(dataclasses.replace(ctx, cuda_capability=(8, 0)))


@pytest.fixture
def no_cuda_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("torch.cuda was queried for a CPU context")

    monkeypatch.setattr(torch.cuda, "get_device_capability", forbidden)
    monkeypatch.setattr(torch.cuda, "is_available", forbidden)


@pytest.mark.usefixtures("no_cuda_calls")
def test_cpu_paths_never_ask_torch_cuda() -> None:
    wl = get_workload("mlp")
    assert cuda_capability_of("cpu") is None
    ctx = context_for(wl, "cpu")
    assert ctx is not None and ctx.cuda_capability is None
    recipe = Recipe.parse(["precision=bf16", "num_workers=1"], workload=wl, device="cpu")
    assert recipe["precision"] == "bf16"
    recipe.with_changes(precision="fp16")
    validate = recipe_validator("mlp", "cpu")
    assert validate({"precision": "bf16"}) is None
    assert validate({"tf32": True}) == get_knob("tf32").not_applicable(ctx)


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """A CUDA build with one sm_75 GPU; records the device each capability query named."""
    queried: list[object] = []

    def capability(device: object = None) -> tuple[int, int]:
        queried.append(device)
        return (7, 5)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", capability)
    monkeypatch.setattr(torch.version, "hip", None)
    yield queried


def test_context_for_reads_the_capability_of_the_named_device(fake_gpu: list[object]) -> None:
    assert cuda_capability_of("cuda:1") == (7, 5)
    assert cuda_capability_of("cuda") == (7, 5)
    assert fake_gpu == [1, None]  # None: torch's current device
    ctx = context_for(None, "cuda:0")
    assert ctx is not None and ctx.cuda_capability == (7, 5)


def test_rocm_capability_is_not_read_as_nvidia_numbering(
    fake_gpu: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.version, "hip", "6.2")
    assert cuda_capability_of("cuda:0") is None
    assert fake_gpu == []


def test_recipe_on_a_fake_pre_ampere_gpu_and_the_tuner_validator(fake_gpu: list[object]) -> None:
    wl = get_workload("mlp")
    with pytest.raises(KnobNotApplicable, match="sm_75"):
        Recipe.parse(["precision=bf16"], workload=wl, device="cuda")
    assert Recipe.parse(["precision=fp16"], workload=wl, device="cuda")["precision"] == "fp16"
    validate = recipe_validator("mlp", "cuda")
    # The bare reason (no value, no knob=value prefix), so the tuner groups it.
    assert validate({"precision": "bf16"}) == BF16_ON_SM75
    assert validate({"precision": "fp16"}) is None
    assert validate({"tf32": True}) == TF32_ON_SM70.replace("sm_70", "sm_75")
    assert validate({"cudnn_benchmark": True}) is None
