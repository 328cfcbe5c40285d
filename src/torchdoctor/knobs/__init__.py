"""Stage: knobs. The catalogue of optimizations and the `Recipe` that selects them.

One module per family (batching, dataloading, precision, compilation, memory_format,
optimizer, threads, checkpointing, cuda); each declares its `Knob`s and exports the helpers
the engine uses to apply them.
"""

from torchdoctor.knobs.base import (
    ApplicabilityContext,
    Choice,
    IntRange,
    Knob,
    KnobValue,
    Safety,
    cpu_count,
    cuda_capability_of,
)
from torchdoctor.knobs.catalogue import catalogue, get_knob
from torchdoctor.knobs.checkpointing import checkpoint_blocks
from torchdoctor.knobs.compilation import compile_model
from torchdoctor.knobs.cuda import CudaFlags, apply_cuda_flags, graph_model, restore_cuda_flags
from torchdoctor.knobs.dataloading import loader_kwargs
from torchdoctor.knobs.memory_format import (
    channels_last_hazard,
    inputs_to_channels_last,
    model_to_channels_last,
)
from torchdoctor.knobs.precision import autocast_context, make_grad_scaler
from torchdoctor.knobs.recipe import Recipe, context_for
from torchdoctor.knobs.threads import apply_threads

__all__ = [
    "ApplicabilityContext",
    "Choice",
    "CudaFlags",
    "IntRange",
    "Knob",
    "KnobValue",
    "Recipe",
    "Safety",
    "apply_cuda_flags",
    "apply_threads",
    "autocast_context",
    "catalogue",
    "channels_last_hazard",
    "checkpoint_blocks",
    "compile_model",
    "context_for",
    "cpu_count",
    "cuda_capability_of",
    "get_knob",
    "graph_model",
    "inputs_to_channels_last",
    "loader_kwargs",
    "make_grad_scaler",
    "model_to_channels_last",
    "restore_cuda_flags",
]
