"""Stage: knobs. The catalogue of optimizations and the `Recipe` that selects them.

One module per family (batching, dataloading, precision, compilation, memory_format,
optimizer, threads, checkpointing, attention, cuda, ddp, fsdp); each declares its `Knob`s with every
part they own (`parts`: how each applies to plain torch objects, is written back, is ordered
by the ladder, is taken by a script, and serves a model), and the stages to the
right read the catalogue instead of keeping lists of knob names. `model.apply_to_model`
applies a recipe to a plain `nn.Module` for the engine (and an inference session);
`workload.workload_under` rebuilds a workload with a recipe's workload parameters.

Importing the package does not import torch (the tuner and the report read the declarations
without it); the names that need torch at import load on first use.
"""

from typing import TYPE_CHECKING

from torchdoctor.core.lazy import lazy_getattr
from torchdoctor.knobs.attention import ATTENTION
from torchdoctor.knobs.base import (
    ApplicabilityContext,
    Choice,
    IntRange,
    Knob,
    KnobValue,
    Safety,
    cpu_count,
    cuda_capability_of,
    show_value,
)
from torchdoctor.knobs.batching import BATCH_SIZE, GRAD_ACCUM
from torchdoctor.knobs.catalogue import (
    catalogue,
    get_knob,
    joint_knobs,
    memory_steps,
    not_injectable,
    registered,
    served,
)
from torchdoctor.knobs.checkpointing import CHECKPOINTING, checkpoint_blocks
from torchdoctor.knobs.compilation import COMPILE, COMPILE_DYNAMIC, compile_model
from torchdoctor.knobs.cuda import (
    CUDA_GRAPHS,
    CUDNN_BENCHMARK,
    TF32,
    CudaFlags,
    apply_cuda_flags,
    eager_forward,
    graph_model,
    restore_cuda_flags,
)
from torchdoctor.knobs.dataloading import (
    NON_BLOCKING,
    NUM_WORKERS,
    PERSISTENT_WORKERS,
    PIN_MEMORY,
    PREFETCH_FACTOR,
)
from torchdoctor.knobs.ddp import (
    BUCKET_CAP_MB,
    DDP_COMM_HOOK,
    DDP_DEFAULT_BUCKET_MB,
    FIND_UNUSED_PARAMETERS,
    GRADIENT_AS_BUCKET_VIEW,
    STATIC_GRAPH,
)
from torchdoctor.knobs.fsdp import (
    FSDP_CPU_OFFLOAD,
    FSDP_MIXED_PRECISION,
    FSDP_PREFETCH,
    FSDP_WRAP,
    RESHARD_AFTER_FORWARD,
)
from torchdoctor.knobs.loader import loader_arguments, loader_kwargs
from torchdoctor.knobs.memory_format import (
    CHANNELS_LAST,
    channels_last_hazard,
    inputs_to_channels_last,
    model_to_channels_last,
)
from torchdoctor.knobs.optimizer import OPTIMIZER_IMPL, SET_TO_NONE
from torchdoctor.knobs.parts import (
    CallEdit,
    DDPArgument,
    EditedCall,
    FSDPArgument,
    Ladder,
    LoaderArgument,
    LoaderKeywordEdit,
    MemoryStep,
    ModelLine,
    ModelTransform,
    NotWritten,
    OptimizerArgument,
    ProcessSetting,
    Script,
    ScriptSite,
    ServedAs,
    Serving,
    Snippet,
    StepSetting,
    TopLine,
    WorkloadParameter,
    WrittenWith,
)
from torchdoctor.knobs.precision import (
    PRECISION,
    autocast_context,
    autocast_snippet,
    make_grad_scaler,
)
from torchdoctor.knobs.recipe import Recipe, context_for
from torchdoctor.knobs.threads import THREADS
from torchdoctor.knobs.workload import parameter_changes, workload_under

if TYPE_CHECKING:
    from torchdoctor.knobs.context import CALLED, RAW, FoundModel, ModelContext
    from torchdoctor.knobs.forward import CheckpointedForward, KnobForward
    from torchdoctor.knobs.model_recipe import apply_to_model, model_transforms
    from torchdoctor.knobs.script_model import model_parts, scales_loss

__getattr__ = lazy_getattr(
    __name__,
    {
        "CheckpointedForward": "torchdoctor.knobs.forward",
        "KnobForward": "torchdoctor.knobs.forward",
        "CALLED": "torchdoctor.knobs.context",
        "RAW": "torchdoctor.knobs.context",
        "ModelContext": "torchdoctor.knobs.context",
        "FoundModel": "torchdoctor.knobs.context",
        "model_parts": "torchdoctor.knobs.script_model",
        "scales_loss": "torchdoctor.knobs.script_model",
        "apply_to_model": "torchdoctor.knobs.model_recipe",
        "model_transforms": "torchdoctor.knobs.model_recipe",
    },
)
from torchdoctor.knobs.threads import apply_threads

__all__ = [
    "ATTENTION",
    "BATCH_SIZE",
    "BUCKET_CAP_MB",
    "CALLED",
    "CHANNELS_LAST",
    "CHECKPOINTING",
    "COMPILE",
    "COMPILE_DYNAMIC",
    "CUDA_GRAPHS",
    "CUDNN_BENCHMARK",
    "DDP_COMM_HOOK",
    "DDP_DEFAULT_BUCKET_MB",
    "FIND_UNUSED_PARAMETERS",
    "FSDP_CPU_OFFLOAD",
    "FSDP_MIXED_PRECISION",
    "FSDP_PREFETCH",
    "FSDP_WRAP",
    "GRADIENT_AS_BUCKET_VIEW",
    "GRAD_ACCUM",
    "NON_BLOCKING",
    "NUM_WORKERS",
    "OPTIMIZER_IMPL",
    "PERSISTENT_WORKERS",
    "PIN_MEMORY",
    "PRECISION",
    "PREFETCH_FACTOR",
    "RAW",
    "RESHARD_AFTER_FORWARD",
    "SET_TO_NONE",
    "STATIC_GRAPH",
    "TF32",
    "THREADS",
    "ApplicabilityContext",
    "CallEdit",
    "CheckpointedForward",
    "Choice",
    "CudaFlags",
    "DDPArgument",
    "EditedCall",
    "FSDPArgument",
    "FoundModel",
    "IntRange",
    "Knob",
    "KnobForward",
    "KnobValue",
    "Ladder",
    "LoaderArgument",
    "LoaderKeywordEdit",
    "MemoryStep",
    "ModelContext",
    "ModelLine",
    "ModelTransform",
    "NotWritten",
    "OptimizerArgument",
    "ProcessSetting",
    "Recipe",
    "Safety",
    "Script",
    "ScriptSite",
    "ServedAs",
    "Serving",
    "Snippet",
    "StepSetting",
    "TopLine",
    "WorkloadParameter",
    "WrittenWith",
    "apply_cuda_flags",
    "apply_threads",
    "apply_to_model",
    "autocast_context",
    "autocast_snippet",
    "catalogue",
    "channels_last_hazard",
    "checkpoint_blocks",
    "compile_model",
    "context_for",
    "cpu_count",
    "cuda_capability_of",
    "eager_forward",
    "get_knob",
    "graph_model",
    "inputs_to_channels_last",
    "joint_knobs",
    "loader_arguments",
    "loader_kwargs",
    "make_grad_scaler",
    "memory_steps",
    "model_parts",
    "model_to_channels_last",
    "model_transforms",
    "not_injectable",
    "parameter_changes",
    "registered",
    "restore_cuda_flags",
    "scales_loss",
    "served",
    "show_value",
    "workload_under",
]
