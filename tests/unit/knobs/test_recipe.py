from __future__ import annotations

import pytest

from torchdoctor.core.errors import KnobError
from torchdoctor.knobs import Recipe, catalogue, get_knob
from torchdoctor.workloads import get_workload


def test_parse_types_values_from_strings() -> None:
    recipe = Recipe.parse(["batch_size=8", "channels_last=true", "compile=Default"])
    assert recipe.to_dict() == {"batch_size": 8, "compile": "default", "channels_last": True}


def test_recipe_is_frozen_and_compares_by_value() -> None:
    a = Recipe.parse(["grad_accum=2"])
    b = Recipe.from_dict({"grad_accum": 2})
    assert a == b and hash(a) == hash(b)
    with pytest.raises(TypeError):
        a["grad_accum"] = 3  # type: ignore[index]


def test_with_changes_and_diff() -> None:
    base = Recipe()
    changed = base.with_changes(precision="bf16", grad_accum=4)
    assert base.to_dict() == {}
    assert changed.diff(base) == {"grad_accum": (4, 1), "precision": ("bf16", "fp32")}
    assert changed.resolved()["compile"] == "off"


def test_round_trip_through_dict() -> None:
    recipe = Recipe.parse(["threads=1", "set_to_none=false"])
    assert Recipe.from_dict(recipe.to_dict()) == recipe


def test_unknown_knob_names_it_and_lists_known() -> None:
    with pytest.raises(KnobError, match=r"unknown knob 'batchsize'.*batch_size"):
        Recipe.parse(["batchsize=8"])


@pytest.mark.parametrize(
    ("setting", "pattern"),
    [
        ("precision=fp8", r"invalid value 'fp8' for knob 'precision'.*fp32, bf16, fp16"),
        ("batch_size=0", r"invalid value 0 for knob 'batch_size'.*integers 1\.\."),
        ("grad_accum=two", r"invalid value 'two' for knob 'grad_accum'"),
        ("channels_last=maybe", r"invalid value 'maybe' for knob 'channels_last'"),
    ],
)
def test_out_of_domain_value_names_knob_value_and_domain(setting: str, pattern: str) -> None:
    with pytest.raises(KnobError, match=pattern):
        Recipe.parse([setting])


def test_malformed_assignment() -> None:
    with pytest.raises(KnobError, match="knob=value"):
        Recipe.parse(["compile"])


@pytest.mark.parametrize("knob", ["pin_memory", "non_blocking", "cudnn_benchmark", "tf32"])
def test_cuda_only_knobs_do_not_apply_on_cpu(knob: str) -> None:
    with pytest.raises(KnobError, match=rf"knob '{knob}=true' does not apply here.*CUDA"):
        Recipe.parse([f"{knob}=true"], device="cpu")
    # ... but validate on a CUDA device (no GPU needed to validate a recipe).
    assert Recipe.parse([f"{knob}=true"], device="cuda")[knob] is True


def test_cuda_graphs_conflicts_with_compile_on_cuda() -> None:
    assert Recipe.parse(["cuda_graphs=true"], device="cuda")["cuda_graphs"] is True
    with pytest.raises(KnobError, match="cuda_graphs"):
        Recipe.parse(["cuda_graphs=true", "compile=default"], device="cuda")
    with pytest.raises(KnobError, match="cuda_graphs"):
        Recipe.parse(["cuda_graphs=true"], device="cpu")


def test_dependent_knobs_need_their_prerequisite() -> None:
    with pytest.raises(KnobError, match=r"persistent_workers.*num_workers"):
        Recipe.parse(["persistent_workers=true"], device="cpu")
    with pytest.raises(KnobError, match=r"prefetch_factor.*num_workers"):
        Recipe.parse(["prefetch_factor=4"], device="cpu")
    with pytest.raises(KnobError, match=r"compile_dynamic.*compile"):
        Recipe.parse(["compile_dynamic=true"], device="cpu")
    ok = Recipe.parse(
        ["num_workers=1", "persistent_workers=true", "prefetch_factor=4"], device="cpu"
    )
    assert ok["prefetch_factor"] == 4


def test_channels_last_only_for_vision_workloads() -> None:
    with pytest.raises(KnobError, match=r"channels_last.*tabular"):
        Recipe.parse(["channels_last=true"], workload=get_workload("mlp"), device="cpu")


def test_with_changes_keeps_the_context() -> None:
    recipe = Recipe(workload=get_workload("mlp"), device="cpu")
    with pytest.raises(KnobError, match="pin_memory"):
        recipe.with_changes(pin_memory=True)


def test_catalogue_declares_every_knob_fully() -> None:
    names = [k.name for k in catalogue()]
    expected = {
        "batch_size", "grad_accum", "num_workers", "pin_memory", "persistent_workers",
        "prefetch_factor", "non_blocking", "precision", "compile", "compile_dynamic",
        "channels_last", "optimizer_impl", "set_to_none", "threads", "checkpointing",
        "attention", "cudnn_benchmark", "tf32", "cuda_graphs", "find_unused_parameters",
        "bucket_cap_mb", "gradient_as_bucket_view", "static_graph", "ddp_comm_hook",
        "reshard_after_forward", "fsdp_mixed_precision", "fsdp_prefetch", "fsdp_cpu_offload",
        "fsdp_wrap",
    }  # fmt: skip
    assert set(names) == expected and len(names) == len(expected)
    for knob in catalogue():
        assert knob.safety in ("exact", "close", "semantic")
        assert knob.description and knob.code_change
        knob.check_value(knob.default)  # the default lies in the domain
        assert get_knob(knob.name) is knob
    assert get_knob("batch_size").safety == "semantic"
    assert get_knob("precision").safety == "close"


def test_a_choice_of_flags_and_integers_parses_each() -> None:
    reshard = get_knob("reshard_after_forward")
    assert [reshard.parse(t) for t in ("true", "off", "2", "8")] == [True, False, 2, 8]
    with pytest.raises(KnobError, match="reshard_after_forward"):
        reshard.parse("3")  # no resharding group of 3 in the domain
    assert get_knob("fsdp_mixed_precision").parse("BF16") == "bf16"


def test_optimizer_impl_default_follows_torch_per_device() -> None:
    knob = get_knob("optimizer_impl")
    assert knob.default_for("cpu") == "for_loop"
    assert knob.default_for("cuda:0") == "foreach"
