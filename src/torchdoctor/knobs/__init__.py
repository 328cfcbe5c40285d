"""Stage: knobs. The catalogue of optimizations and the `Recipe` that selects them.

One module per family (batching, dataloading, precision, compilation, memory_format,
optimizer, threads, checkpointing, cuda); each declares its `Knob`s and exports the helpers
the engine uses to apply them.
"""

from torchdoctor.knobs.base import ApplicabilityContext, Knob, KnobValue, Safety
from torchdoctor.knobs.catalogue import catalogue, get_knob
from torchdoctor.knobs.recipe import Recipe

__all__ = [
    "ApplicabilityContext",
    "Knob",
    "KnobValue",
    "Recipe",
    "Safety",
    "catalogue",
    "get_knob",
]
