"""Stage: workloads. The `ModelSpec` and `Workload` protocols (a model, then its training), the
built-in workloads and user workload loading.

Built-in: `cnn` (vision), `gpt` (language), `mlp` (tabular), `recsys` (embeddings). A user's
own workload is `path/to/file.py:factory`, where `factory(**params)` returns a `Workload`.
`TinyGPT` (gpt's model) and its `KVCache` are exported for serving's generation timings.
"""

from torchdoctor.workloads.base import (
    WORKLOAD_KINDS,
    Batch,
    ModelSpec,
    SyntheticWorkload,
    Workload,
    WorkloadKind,
    collate_first,
    example_inputs,
    move_to_device,
)
from torchdoctor.workloads.gpt import KVCache, TinyGPT
from torchdoctor.workloads.registry import (
    get_workload,
    import_factory,
    list_workloads,
    load_user_workload,
)

__all__ = [
    "WORKLOAD_KINDS",
    "Batch",
    "KVCache",
    "ModelSpec",
    "SyntheticWorkload",
    "TinyGPT",
    "Workload",
    "WorkloadKind",
    "collate_first",
    "example_inputs",
    "get_workload",
    "import_factory",
    "list_workloads",
    "load_user_workload",
    "move_to_device",
]
