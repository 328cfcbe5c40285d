"""The parts a knob owns besides its domain: how it applies, how it is written back, where the
ladder tries it, whether a script can take it, and how it serves a model. (Which findings
prescribe it is the rules' to say, in their prescriptions: `diagnose.rules.prescribing`.)

A knob module declares them next to its `Knob` (torchtitan's "a feature owns its transform"),
and the stages read them from the catalogue instead of keeping lists of knob names: the
engine session applies a knob through `applies_to`; the script injection through its
`Script.site` (a model knob through `Script.on_model`, sharing the transform's code); `serve`
through `Serving`; the ladder orders knobs by `Ladder`, which also says which knobs the joint
search and the memory ladder try; the patch writer writes them through `write_back`. A test
over the catalogue fails when a part is missing, and one over the source when a stage names
or applies a knob itself (`tests/unit/knobs/`). This module is data and plain torch functions
only: it sits left of the engine, collect, diagnose and tune (rule ids are strings here).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

KnobValue = int | bool | str | None

# ---- how a knob applies to plain torch objects -------------------------------------------------


@dataclass(frozen=True)
class ProcessSetting:
    """A process-wide setting (a torch flag): `apply(value)` sets it and returns the function
    that puts back what was there. The engine session applies it when it starts (and undoes it
    at close); the script injection at install (undone at uninstall). `device_types`: the
    devices it is applied on (None: every device); `shown`: what the script injection records
    it did (None: `knob=value at start`)."""

    apply: Callable[[KnobValue], Callable[[], None]]
    device_types: tuple[str, ...] | None = None
    shown: str | None = None

    def applies_on(self, device_type: str) -> bool:
        return self.device_types is None or device_type in self.device_types


@dataclass(frozen=True)
class LoaderArgument:
    """A DataLoader keyword argument. `order`: where it is set among the loader's knobs (the
    injection and the patch writer set them in this order); `position`: its index among
    DataLoader's positional-or-keyword parameters (None: keyword-only); `needs_workers`: it
    exists only with worker processes; `fallback`: the value the engine passes when the
    recipe leaves it unset (None: the engine's own, `default_workers` for num_workers);
    `engine`: whether the engine passes it among the loader's keyword arguments (batch_size is
    the session's own argument)."""

    keyword: str
    order: int
    position: int | None = None
    needs_workers: bool = False
    fallback: KnobValue = None
    engine: bool = True


@dataclass(frozen=True)
class OptimizerArgument:
    """Chosen when the optimizer is built (`torch.optim.X(params, **kwargs(value))`)."""

    kwargs: Callable[[KnobValue], Mapping[str, Any]]


@dataclass(frozen=True)
class ModelTransform:
    """Applied to the model: `apply(model, value, ctx)` returns the module to use
    (`knobs.context.ModelContext`; None: read by another knob's transform, as compile_dynamic by
    compile's). `stage`: "raw" transforms change the module the optimizer trains (memory
    format, checkpointing) and must act in place for a script to take them; "called" ones give
    the module the steps call (compile, CUDA graphs). `order` within the stage.
    `knobs.model_recipe.apply_to_model` applies them, for the engine and an inference session."""

    stage: str
    order: int
    apply: Callable[..., Any] | None = None


@dataclass(frozen=True)
class StepSetting:
    """Read by the training step itself (the engine's loop): micro-batches, autocast, copies,
    zero_grad."""

    what: str


@dataclass(frozen=True)
class DDPArgument:
    """Chosen when a `DistributedDataParallel` is built (a torchrun job's): `keyword`, the
    constructor's keyword argument the value is passed as; None: `hook(value)` names the
    `torch.distributed.algorithms.ddp_comm_hooks.default_hooks` function registered on the built
    module (`register_comm_hook(None, hook)`), None for no hook."""

    keyword: str | None = None
    hook: Callable[[KnobValue], str | None] | None = None


@dataclass(frozen=True)
class FSDPArgument:
    """Chosen where a torchrun job's script shards a module with FSDP2's `fully_shard(...)`:
    `keywords(value)` gives the keyword arguments the call takes for the value (none: the knob
    acts on the sharded modules after the call, as `prefetch` does); `blocks_only`: the value
    is passed to the calls that shard a block (a module holding no module sharded before it),
    not to the outer call that shards the root, whose setting FSDP chooses apart (the root
    keeps its parameters after forward). `prefetch(value)`: the depth of explicit forward and
    backward prefetching set on the sharded blocks (`FSDPModule.set_modules_to_*_prefetch`).
    `for_world(value, ranks)`: why the value cannot act on a job of that many ranks (None: it
    can). `source(value)`: the keywords as the script writes them (the patch writer's), and
    `imports`: the import line that text needs (None: torch's own names only).
    `units(value, module)`: at a call that shards a module holding no module sharded before
    it, the submodules sharded first, each its own unit with the call's keywords ([]: none,
    the call as written)."""

    keywords: Callable[[KnobValue], Mapping[str, Any]] | None = None
    #: what FSDP runs a block with when the call leaves the keyword unset (None): a block
    #: given that value explicitly is the job as it was
    block_default: KnobValue = None
    source: Callable[[KnobValue], Mapping[str, str]] | None = None
    imports: str | None = None
    blocks_only: bool = False
    prefetch: Callable[[KnobValue], int] | None = None
    for_world: Callable[[KnobValue, int], str | None] | None = None
    units: Callable[[KnobValue, Any], list[Any]] | None = None


@dataclass(frozen=True)
class WorkloadParameter:
    """A parameter of the workload itself (what `get_workload(name, **params)` takes): the
    engine rebuilds the workload with the value before it builds the model
    (`knobs.workload.workload_under`), so the model is the one the workload builds that way,
    with the same seed and so the same initial weights where the parameter changes none.
    Only a workload that exposes the parameter and can be rebuilt (`with_params`) takes it."""

    parameter: str


AppliesTo = (
    ProcessSetting
    | LoaderArgument
    | OptimizerArgument
    | ModelTransform
    | StepSetting
    | DDPArgument
    | FSDPArgument
    | WorkloadParameter
)

# ---- how a knob is written back into the user's files ------------------------------------------


@dataclass(frozen=True)
class LoaderKeywordEdit:
    """The DataLoader call the injection acted at gets the keyword (its `LoaderArgument`)."""


class EditedCall(Enum):
    """A call of the script the patch writer edits in place (where the injection acted)."""

    #: a torch.optim constructor: its implementation keywords (`OptimizerArgument.kwargs`)
    OPTIMIZER = "optimizer"
    #: `zero_grad(...)`: its set_to_none
    ZERO_GRAD = "zero_grad"
    #: the script's own `torch.set_num_threads(N)`, else a line after its imports
    SET_NUM_THREADS = "set_num_threads"
    #: FSDP2's `fully_shard(...)`: the keywords of the knob's `FSDPArgument`
    FULLY_SHARD = "fully_shard"


@dataclass(frozen=True)
class CallEdit:
    """A call the injection acted at is edited (`EditedCall`): the patch writer's editor of
    that call takes the knob and its value."""

    call: EditedCall


@dataclass(frozen=True)
class ModelLine:
    """A line after the model's assignment: `line(value, recipe)` with `model` as its name (None:
    nothing to write for that value); `order` among the model's lines; `also`: a snippet
    (where, code) the line needs besides."""

    line: Callable[[KnobValue, Mapping[str, Any]], str | None]
    order: int
    also: tuple[str, str] | None = None


@dataclass(frozen=True)
class TopLine:
    """A line after the script's imports: `line(value)`."""

    line: Callable[[KnobValue], str]


@dataclass(frozen=True)
class Snippet:
    """No line to edit: code to paste, and where. `code(value, device_type)` (None: nothing to
    paste for that value)."""

    where: str
    code: Callable[[KnobValue, str], str | None]


@dataclass(frozen=True)
class WrittenWith:
    """Written by another knob's write-back (compile_dynamic inside compile's line)."""

    knob: str


@dataclass(frozen=True)
class NotWritten:
    """No write-back, and why."""

    reason: str


#: The write-back of a knob an unmodified script cannot take (`Script.not_injectable`): no run
#: of a script records where it acted, so there is no place to write it.
NOT_IN_SCRIPTS = NotWritten("a script cannot take it, so no run of one records where it goes")


WriteBack = LoaderKeywordEdit | CallEdit | ModelLine | TopLine | Snippet | WrittenWith | NotWritten

# ---- serving: the knob as an inference variant ------------------------------------------------


@dataclass(frozen=True)
class ServedAs:
    """An inference variant of `serve` that is this knob at `value` (None: a value given with
    the name, `name:N`, and `parameter` says what it is). `rank`: its place among every variant
    (`serve` lists them by rank, spaced by ten); `description`: what it does to a model."""

    name: str
    value: KnobValue
    rank: int
    description: str
    parameter: str | None = None


@dataclass(frozen=True)
class Serving:
    """How the knob serves a model: `forward(model, value, device_type, args)` applies it to a
    copy of the model (in eval mode, its example arguments `args`) and returns the function
    that runs one request's arguments (`serve` adds no_grad around it); KnobNotApplicable where
    it does not apply to that model. `lossy`: it changes every output a little (reduced
    precision), so it is held to the lossy tolerance and repaired by a per-module fp32
    fallback."""

    variants: tuple[ServedAs, ...]
    forward: Callable[..., Callable[[tuple[Any, ...]], Any]]
    lossy: bool = False


# ---- the ladder, scripts, findings -------------------------------------------------------------


@dataclass(frozen=True)
class MemoryStep:
    """A step of the memory ladder (`tune --objective fit`): the value tried, and its rank
    among the steps (lower first; spaced by ten, as the ladder's ranks)."""

    rank: int
    value: KnobValue


@dataclass(frozen=True)
class Ladder:
    """Where the ladder tries the knob: its rank in the GPU prior and in the CPU prior (lower
    first; None: after every ranked knob, in catalogue order). The ranks are spaced by ten so a
    new knob slots in between without renumbering."""

    gpu: int | None
    cpu: int | None = None
    #: tried by the batch-size search, not flipped one at a time by the ladder
    batch_search: bool = False
    #: searched together by the joint refinement: its cost interacts with the other joint
    #: knobs' (compilation, numeric format, memory layout, parallelism, batch size)
    joint: bool = False
    #: tried by the memory ladder, where it lowers peak memory
    memory: MemoryStep | None = None


class ScriptSite(Enum):
    """Where in an unmodified script a knob acts; the script injection builds one injector per
    site a recipe's knobs name (`collect/inject/coordinator.py`), in this order."""

    #: torch.set_num_threads at start, the script's own calls kept at the recipe's count
    THREADS = "threads"
    #: the DataLoader's keyword arguments at its construction (`LoaderArgument`)
    LOADER = "dataloading"
    #: the optimizer's construction and zero_grad
    OPTIMIZER = "optimizer"
    #: the trained top-level module at its first call (`Script.on_model`)
    MODEL = "model"
    #: DistributedDataParallel's construction (`DDPArgument`)
    DDP = "ddp"
    #: FSDP2's `fully_shard(...)` calls (`FSDPArgument`)
    FSDP = "fsdp"
    #: any other process-wide setting (`ProcessSetting`: CUDA backend flags, ...), at start
    PROCESS = "process"


@dataclass(frozen=True)
class Script:
    """How the script injection takes the knob: `site` says where it acts in the script
    (`ScriptSite`), or `not_injectable` says why an unmodified script cannot take it.
    `unchanged`: values that ask the script for nothing (its own setting stands); `per_loader`:
    applicability is judged per DataLoader the script builds, not from the recipe.

    A model knob's `on_model(value, found)` acts on the module the script trains
    (`knobs.script_model.FoundModel`); None: its `ModelTransform`, where it acts in place.
    `scales_loss(value)`: the value has the script's backward and optimizer steps go through
    the loss scaler the knob's `on_model` sets (fp16)."""

    site: ScriptSite | None = None
    not_injectable: str | None = None
    unchanged: tuple[KnobValue, ...] = ()
    per_loader: bool = False
    on_model: Callable[..., None] | None = None
    scales_loss: Callable[[KnobValue], bool] | None = None
