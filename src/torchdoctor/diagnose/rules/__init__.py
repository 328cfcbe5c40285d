"""The diagnosis rules, one module each, with a stable `RULE_ID` and a doc page in
docs/rules/<rule_id>.md. A rule is `check(Evidence) -> Finding | None`; it returns None
when the evidence it needs is absent, so every source runs every rule safely.

A rule names the knobs it prescribes by their constants (`Prescription(knobs={PRECISION.name:
...})`), the one place the link between a rule and a knob is stated: `prescribing(knob)`
reads it back from the knob constants the rule modules hold."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding
from torchdoctor.diagnose.rules import (
    channels_last,
    compile_graph_breaks,
    constant_to_device,
    cpu_threads,
    cudnn_benchmark_off,
    dataloader_wait,
    ddp_communication,
    ddp_unused_parameter_search,
    distributed_debug_detail,
    eval_without_no_grad,
    framework_overhead,
    fsdp_exposed_all_gather,
    fsdp_fp32_communication,
    fsdp_reshard_after_forward,
    fsdp_root_only_wrap,
    handwritten_attention,
    host_python_lines,
    host_sync,
    lower_precision_available,
    memory_bound_elementwise,
    memory_headroom,
    optimizer_share,
    pageable_h2d,
    rank_straggler,
    ranks_oversubscribed,
    world_size_changed,
    zero_grad_set_to_none,
)
from torchdoctor.knobs import Knob

RULE_MODULES: tuple[ModuleType, ...] = (
    dataloader_wait,
    host_sync,
    framework_overhead,
    host_python_lines,
    memory_bound_elementwise,
    lower_precision_available,
    channels_last,
    optimizer_share,
    zero_grad_set_to_none,
    eval_without_no_grad,
    cpu_threads,
    pageable_h2d,
    cudnn_benchmark_off,
    compile_graph_breaks,
    memory_headroom,
    ddp_communication,
    ddp_unused_parameter_search,
    fsdp_exposed_all_gather,
    fsdp_reshard_after_forward,
    fsdp_fp32_communication,
    fsdp_root_only_wrap,
    distributed_debug_detail,
    ranks_oversubscribed,
    world_size_changed,
    rank_straggler,
    handwritten_attention,
    constant_to_device,
)

Rule = Callable[[Evidence], Finding | None]

RULES: dict[str, Rule] = {m.RULE_ID: m.check for m in RULE_MODULES}


def prescribed_by(module: ModuleType) -> tuple[Knob, ...]:
    """The knobs a rule module prescribes: the knob constants it holds (it imports a knob's
    constant to name the knob in its prescriptions, and for nothing else)."""
    return tuple(value for value in vars(module).values() if isinstance(value, Knob))


def prescribing(knob: str) -> tuple[str, ...]:
    """The ids of the rules whose findings prescribe `knob` (by name), in the rules' order."""
    return tuple(
        module.RULE_ID
        for module in RULE_MODULES
        if any(k.name == knob for k in prescribed_by(module))
    )


__all__ = ["RULES", "RULE_MODULES", "Rule", "prescribed_by", "prescribing"]
