"""What the instrumentation saw in one process of a user's script: the `ScriptProfile` record.

Torch-free on purpose: the launcher's parent process reads these records without importing
torch, and the diagnosis rules read them as plain data.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from torchdoctor.core.copies import CopyCounts
from torchdoctor.core.hostlines import HostLineProfile
from torchdoctor.core.memory_owners import StepMemory
from torchdoctor.core.records import Record, SubRecord
from torchdoctor.core.redact import redact_argv
from torchdoctor.core.steps import StepTiming

StepDetection = Literal["optimizer_hook", "backward", "none"]
EndedBy = Literal["completed", "max_steps", "sys_exit", "exception", "killed", "not_started"]
TimingMethod = Literal["host_clock", "cuda_events"]

#: Kinds of host synchronization point the sync counters distinguish.
SyncKind = Literal["item", "cpu", "tolist", "numpy", "print", "cuda_synchronize"]


class DataLoaderInfo(SubRecord):
    """One torch DataLoader the script iterated, with the settings that shape its speed."""

    num_workers: int
    pin_memory: bool
    batch_size: int | None
    persistent_workers: bool
    prefetch_factor: int | None
    multiprocessing_context: str | None
    dataset_len: int | None
    batches_fetched: int = 0
    wait_s: float = 0.0


#: Host-to-device copies seen through Tensor.to / Tensor.cuda (the diagnosis reads the same
#: record as its copy evidence).
H2DInfo = CopyCounts


class ForwardEvidence(SubRecord):
    """Outermost module calls, for the evaluation-without-no_grad rule.

    `grad_forwards_without_backward`: forwards run with autograd enabled whose graph no
    backward call ever consumed (evaluation or logging done without no_grad/inference_mode).
    """

    calls: int = 0
    grad_enabled_calls: int = 0
    eval_mode_grad_calls: int = 0
    grad_forwards_without_backward: int = 0


class ZeroGradEvidence(SubRecord):
    """zero_grad calls (optimizer and module), split by set_to_none."""

    calls: int = 0
    set_to_none_false_calls: int = 0


class ThreadInfo(SubRecord):
    """CPU thread settings at the end of the run and the cores the process may use."""

    torch_num_threads: int
    torch_num_interop_threads: int
    omp_num_threads: str | None
    mkl_num_threads: str | None
    cpu_count: int | None
    usable_cores: int | None


class DistributedInfo(SubRecord):
    """A distributed rank's settings the rules read (collect/probes/ddp.py)."""

    #: TORCH_DISTRIBUTED_DEBUG as the rank ran (None: unset, torch's OFF)
    debug: str | None = None
    #: ranks on this host (LOCAL_WORLD_SIZE, set by torchrun)
    local_world_size: int | None = None
    #: find_unused_parameters of each DistributedDataParallel module the rank built
    find_unused_parameters: list[bool] = Field(default_factory=list)


class ScriptProfile(Record):
    """One process of an instrumented script: steps, phases and the evidence the rules need."""

    schema_name: ClassVar[str] = "script_profile"
    #: Version 2: `host_lines`, and the constant copies in `h2d`; 3: `distributed`; 4:
    #: `memory` and `memory_skipped`. Older records still read.
    schema_version: ClassVar[int] = 4

    #: The command as run, its secrets masked (core/redact.py): a profile is shared and
    #: attached to bug reports, and nothing reruns a script from it.
    argv: list[str]
    module: bool = False
    exit_code: int | None = None
    ended_by: EndedBy = "completed"
    error: str | None = None
    steps: list[StepTiming] = Field(default_factory=list)
    step_detection: StepDetection = "none"
    timing_method: TimingMethod = "host_clock"
    device: str = "cpu"
    dataloaders: list[DataLoaderInfo] = Field(default_factory=list)
    sync_counts: list[dict[SyncKind, int]] = Field(default_factory=list)
    sync_seconds: list[float] = Field(
        default_factory=list, description="per step: seconds inside the counted sync calls"
    )
    sync_outside_seconds: list[float] = Field(
        default_factory=list, description="per step: the part of sync_seconds outside phases"
    )
    sync_sites: dict[str, int] = Field(default_factory=dict)
    h2d: H2DInfo = Field(default_factory=H2DInfo)
    forward: ForwardEvidence = Field(default_factory=ForwardEvidence)
    zero_grad: ZeroGradEvidence = Field(default_factory=ZeroGradEvidence)
    backward_calls: int = 0
    optimizer_impls: list[str] = Field(
        default_factory=list, description="implementations of the optimizers that stepped"
    )
    autocast_dtypes: list[str] = Field(
        default_factory=list, description="dtypes of autocast regions entered inside steps"
    )
    optimizer_steps: int = 0
    threads: ThreadInfo | None = None
    trace_path: str | None = None
    trace_steps: list[int] = Field(default_factory=list)
    host_lines: HostLineProfile | None = Field(
        default=None, description="host time by Python line over the steady steps (sampled)"
    )
    #: memory to its owners in one steady step (collect/probes/step_memory.py), and why none was
    #: measured when it was asked for and could not be
    memory: StepMemory | None = None
    memory_skipped: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    #: a distributed rank's settings (None outside a torchrun job)
    distributed: DistributedInfo | None = None
    pid: int | None = None
    wall_s: float = 0.0
    errors: list[str] = Field(default_factory=list)

    @field_validator("argv")
    @classmethod
    def _masked(cls, argv: list[str]) -> list[str]:
        return redact_argv(argv)

    @property
    def step_count(self) -> int:
        return len(self.steps)

    @property
    def trained(self) -> bool:
        """Whether at least one training step was seen."""
        return bool(self.steps)
