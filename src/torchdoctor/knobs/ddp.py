"""DistributedDataParallel's own settings: a torchrun job's gradient buckets, graph and
all-reduce.

Each is a keyword of `DistributedDataParallel(...)` (or a communication hook registered on the
built module), so an unmodified script takes it where it builds its DDP module
(collect/inject/ddp.py). They apply only to a job that builds one: a built-in workload runs in
one process, and the tuner offers them only on a torchrun command (`tune/torchrun.py`).

- `bucket_cap_mb`: the size of the gradient buckets DDP all-reduces as backward fills them
  (DDP's default 25 MB). Larger buckets mean fewer all-reduce calls, which pays where each call
  has a high fixed cost (gloo, small models); smaller buckets start the first all-reduce
  earlier in backward (the PyTorch DDP paper, Li et al. VLDB 2020, section 5.3: the best size
  depends on the model and the network, so it is measured, not assumed).
- `gradient_as_bucket_view`: gradients are views into the buckets, which saves one copy of
  every gradient into its bucket and the memory of one gradient set (DDP docs). Exact.
- `static_graph`: the set of used parameters and the graph are the same every step, so DDP
  can skip re-checking them and overlap more (DDP docs). Exact where it holds; a script whose
  graph changes fails under it, and its trial is recorded as failed.
- `find_unused_parameters=False`: turns off the search of the autograd graph for parameters
  the forward did not use, a traversal every step (DDP docs: "this flag results in an extra
  traversal of the autograd graph every iteration, which can slow down training"). A script
  whose forward does use every parameter gains it; one that leaves some unused fails under it.
The ladder tries them after the general knobs (they are offered to a torchrun job only,
`tune/torchrun.py`), the unused-parameter search first: it costs a traversal every step where
the others change how the same bytes move.

- `ddp_comm_hook`: gradients all-reduced in fp16 or bf16 and cast back
  (`ddp_comm_hooks.default_hooks.fp16_compress_hook`, `bf16_compress_hook`): half the bytes
  on the network, numerically close (safety "close", judged by the quality check).
"""

from __future__ import annotations

from torchdoctor.knobs.base import (
    ApplicabilityContext,
    Choice,
    IntRange,
    Knob,
    KnobValue,
    torchrun_only,
)
from torchdoctor.knobs.parts import DDPArgument, Ladder, Script, ScriptSite, Snippet

#: DDP's own bucket size in MB (`DistributedDataParallel(bucket_cap_mb=None)` means 25).
DDP_DEFAULT_BUCKET_MB = 25
#: The largest bucket the knob takes: past a few hundred MB one bucket holds every gradient
#: of the models DDP is used for here, and the all-reduce no longer overlaps backward at all.
MAX_BUCKET_MB = 1024
#: Where a DDP setting's line goes in a script.
_AT_DDP = "in the DistributedDataParallel(...) call"


_only_ddp = torchrun_only("a torchrun job's DistributedDataParallel")


def _keyword_line(keyword: str) -> Snippet:
    return Snippet(_AT_DDP, lambda value, _device: f"{keyword}={value!r}")


BUCKET_CAP_MB = Knob(
    name="bucket_cap_mb",
    family="ddp",
    description="Size in MB of DDP's gradient buckets, all-reduced as backward fills them "
    f"(DDP's default: {DDP_DEFAULT_BUCKET_MB}).",
    code_change="DistributedDataParallel(model, bucket_cap_mb=N)",
    safety="exact",
    domain=IntRange(1, MAX_BUCKET_MB),
    default=None,
    not_applicable=_only_ddp,
    applies_to=DDPArgument(keyword="bucket_cap_mb"),
    write_back=_keyword_line("bucket_cap_mb"),
    ladder=Ladder(gpu=115, cpu=200),
    script=Script(site=ScriptSite.DDP),
)

GRADIENT_AS_BUCKET_VIEW = Knob(
    name="gradient_as_bucket_view",
    family="ddp",
    description="Gradients as views into DDP's buckets: one gradient copy and its memory saved.",
    code_change="DistributedDataParallel(model, gradient_as_bucket_view=True)",
    safety="exact",
    domain=Choice((False, True)),
    default=False,
    not_applicable=_only_ddp,
    applies_to=DDPArgument(keyword="gradient_as_bucket_view"),
    write_back=_keyword_line("gradient_as_bucket_view"),
    ladder=Ladder(gpu=125, cpu=210),
    script=Script(site=ScriptSite.DDP, unchanged=(False,)),
    no_rule="it saves a copy per gradient, which no diagnosis measures apart",
)

STATIC_GRAPH = Knob(
    name="static_graph",
    family="ddp",
    description="Tell DDP the graph and the used parameters are the same every step.",
    code_change="DistributedDataParallel(model, static_graph=True)",
    safety="exact",
    domain=Choice((False, True)),
    default=False,
    not_applicable=_only_ddp,
    applies_to=DDPArgument(keyword="static_graph"),
    write_back=_keyword_line("static_graph"),
    ladder=Ladder(gpu=135, cpu=220),
    script=Script(site=ScriptSite.DDP, unchanged=(False,)),
    no_rule="whether a graph is static is only known by running it, as its trial does",
)

FIND_UNUSED_PARAMETERS = Knob(
    name="find_unused_parameters",
    family="ddp",
    description="Turn off DDP's search of the autograd graph for unused parameters "
    "(a traversal every step).",
    code_change="DistributedDataParallel(model, find_unused_parameters=False)",
    safety="exact",
    domain=Choice((False,)),
    default=None,
    not_applicable=_only_ddp,
    applies_to=DDPArgument(keyword="find_unused_parameters"),
    write_back=_keyword_line("find_unused_parameters"),
    ladder=Ladder(gpu=105, cpu=190),
    script=Script(site=ScriptSite.DDP),
)

#: hook value -> the `default_hooks` function it registers
COMM_HOOKS: dict[str, str] = {"fp16": "fp16_compress_hook", "bf16": "bf16_compress_hook"}


def _hook_name(value: KnobValue) -> str | None:
    return COMM_HOOKS.get(str(value))


def _hook_applies(value: KnobValue, ctx: ApplicabilityContext) -> str | None:
    if value == "bf16" and ctx.device_type != "cuda":
        # torch's bf16_compress_hook checks for it (ddp_comm_hooks/default_hooks.py)
        return "bf16 gradient compression needs CUDA 11+ with NCCL 2.10+"
    return None


DDP_COMM_HOOK = Knob(
    name="ddp_comm_hook",
    family="ddp",
    description="All-reduce gradients compressed to fp16 or bf16 (half the bytes), cast back.",
    code_change="model.register_comm_hook(None, default_hooks.fp16_compress_hook)",
    safety="close",
    domain=Choice(("none", "fp16", "bf16")),
    default="none",
    not_applicable=_only_ddp,
    value_not_applicable=_hook_applies,
    applies_to=DDPArgument(hook=_hook_name),
    write_back=Snippet(
        "after the DistributedDataParallel(...) call",
        lambda value, _device: (
            None
            if _hook_name(value) is None
            else "from torch.distributed.algorithms.ddp_comm_hooks import default_hooks\n"
            f"model.register_comm_hook(None, default_hooks.{_hook_name(value)})"
        ),
    ),
    ladder=Ladder(gpu=145, cpu=230),
    script=Script(site=ScriptSite.DDP, unchanged=("none",)),
)

KNOBS = (
    FIND_UNUSED_PARAMETERS,
    BUCKET_CAP_MB,
    GRADIENT_AS_BUCKET_VIEW,
    STATIC_GRAPH,
    DDP_COMM_HOOK,
)
