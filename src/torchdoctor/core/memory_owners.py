"""Memory to its owners: what one training step holds, and how it grows with the batch.

`StepMemory` is what collect/memory_owners.py measures in one steady training step (raw bytes:
each owner from the tensors themselves, the step's peak from the live tensors or, on a GPU,
the CUDA caching allocator). `MemoryOwners` is analyze/memory_fit.py's split of it into owners
(parameters, gradients, optimizer state, activations saved for backward, temporaries,
allocator slack) at the step's peak. `MemoryPlan` holds the owners at two or more batch
sizes, the lines memory(batch) = fixed + per_sample * batch whose maximum is the footprint,
and what they predict under a budget.

The records are here, in `core`, so the collector, the analysis, the report and the CLI share
them without importing one another. Nothing here imports torch.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from torchdoctor.core.records import Record, SubRecord

#: Where a step's peak comes from: the live tensors' storages (CPU, whose allocator is the C
#: library's malloc and keeps no statistics torch can read) or the CUDA caching allocator.
PeakSource = Literal["tensors", "cuda_allocator"]

#: A step's phases, each with its own peak: the forward and backward (the loader's batch
#: included) up to the optimizer's step, then the optimizer's step.
FORWARD_BACKWARD = "forward_backward"
OPTIMIZER = "optimizer"


class StepMemory(SubRecord):
    """The raw measurement of one steady training step at one batch size (bytes)."""

    batch_size: int
    device: str
    source: PeakSource
    #: Parameters and buffers (unique storages).
    parameters_bytes: int
    #: One gradient per trainable parameter, in its dtype (what backward accumulates).
    gradients_bytes: int
    #: Tensors in the optimizer's state (moments, step counters), parameters excluded.
    optimizer_state_bytes: int
    #: Unique storages saved for backward during the forward, parameters excluded.
    activations_bytes: int
    #: The step's storages alive at its highest moment, by owner ("activations",
    #: "gradients", "temporaries"; the resident parameters and optimizer state come on top).
    at_peak: dict[str, int] = Field(default_factory=dict)
    #: Each phase's peak ("forward_backward", "optimizer"): allocated bytes at their
    #: high-water mark, counting what was resident when the step began (parameters,
    #: optimizer state).
    phase_peaks: dict[str, int]
    #: The CUDA allocator's reserved bytes at each phase's peak (None on CPU).
    phase_reserved_peaks: dict[str, int] | None = None
    #: Allocated bytes at each local maximum of the step's tensor timeline, in order (the
    #: resident bytes included). Steps of one model at other batch sizes run the same ops, so
    #: their timelines align point by point, and each point is a line in the batch size.
    timeline: list[int] = Field(default_factory=list)
    #: The process's resident set when the measured step began (None where unread): with the
    #: resident tensors taken off, what the process holds besides the step (interpreter,
    #: libraries, the dataset, pages malloc keeps).
    process_rss_bytes: int | None = None

    @property
    def peak_bytes(self) -> int:
        return max(self.phase_peaks.values())


class MemoryOwners(SubRecord):
    """One step's memory at its peak, split into its owners (bytes).

    The owners do not all peak at once: backward frees activations as it makes gradients. So
    each owner is what it held at the step's highest moment, and parameters, gradients,
    optimizer state, activations and temporaries add up to the peak. `activations_saved_bytes`
    and `gradients_bytes` are the whole of each over the step.
    """

    batch_size: int
    device: str
    source: PeakSource
    parameters_bytes: int
    gradients_at_peak_bytes: int
    optimizer_state_bytes: int
    activations_at_peak_bytes: int
    temporaries_bytes: int
    #: Every gradient (one per trainable parameter) and every activation saved for backward.
    gradients_bytes: int
    activations_saved_bytes: int
    #: Reserved less allocated at the peak: memory the caching allocator holds that no tensor
    #: uses (None on CPU, where malloc's retained pages cannot be told from the process's own).
    slack_bytes: int | None
    peak_bytes: int

    @property
    def footprint_bytes(self) -> int:
        """What the process needs for the step: the allocator's reserved peak where there is
        one, else the allocated peak."""
        return self.peak_bytes + (self.slack_bytes or 0)


class LinearFit(SubRecord):
    """memory(batch) = fixed + per_sample * batch, fitted by least squares (bytes)."""

    fixed_bytes: float
    per_sample_bytes: float
    #: Root mean square of the fit's residuals over its points (0 for two points).
    residual_bytes: float
    batch_sizes: list[int]

    def at(self, batch_size: float) -> float:
        return self.fixed_bytes + self.per_sample_bytes * batch_size


class CappedStep(SubRecord):
    """One probe of the real out-of-memory edge on the CPU: a steady step at `batch` in a child
    process whose data size is capped (procs/_capped.py), and how it ended."""

    batch: int
    budget_bytes: int
    #: "fits", or the failure that ended the step ("oom", "crash", "error", "timeout": the
    #: values of `procs.FailureKind`).
    outcome: str
    #: The failure's first line ("" when it fits).
    reason: str = ""
    #: The child's data size (`VmData`) with the session built, before its first step.
    data_before_bytes: int | None = None
    #: Its data size after the warm-up step: the cap's base.
    data_base_bytes: int | None = None
    #: The tensors resident then that the prediction counts (parameters, buffers, optimizer
    #: state, gradients held); the cap is `data_base_bytes - resident_bytes + budget_bytes`.
    resident_bytes: int | None = None
    limit_bytes: int | None = None

    @property
    def fits(self) -> bool:
        return self.outcome == "fits"


class OomEdge(SubRecord):
    """The largest batch whose real steady step ran under the cap, and the probes that said so."""

    budget_bytes: int
    #: The largest batch seen to fit (`low - 1` when none did; the search's top when it did).
    edge: int
    #: The smallest batch seen to run out of memory (None when none did).
    first_over: int | None = None
    #: The search's top: an edge there says only that the edge is at least that.
    high: int
    #: How the cap was made: "rlimit_data" (the CPU's data size) or "cuda_allocator".
    mechanism: str = "rlimit_data"
    probes: list[CappedStep] = Field(default_factory=list)


class MemoryPlan(Record):
    """The owners at a few batch sizes, the fit, and the largest batch under a budget.

    A script's step (`diagnose -- python train.py`) is measured at the script's own batch
    alone: its plan holds the owners of that one step and no fit (the fit fields None, the
    envelope empty), since a line needs two batch sizes and a script's batch is its own.
    """

    schema_name: ClassVar[str] = "memory_plan"
    #: 2: the fit's fields may be None (one step measured: a script's); 3: `oom_edge` (a
    #: prediction checked against the real out-of-memory edge).
    schema_version: ClassVar[int] = 3

    workload: str
    device: str
    steps: list[MemoryOwners]
    #: The step's footprint (its peak, plus slack on a GPU) against the batch size: the
    #: fixed and per-sample memory, fitted through the measured steps.
    peak_fit: LinearFit | None = None
    #: The lines whose maximum predicts the footprint at any batch (analyze/memory_fit.py,
    #: `envelope_lines`); the binding one differs between small and large batches.
    envelope: list[LinearFit] = Field(default_factory=list)
    #: The envelope's line that binds where the prediction is made (at the largest batch under
    #: the budget, else at the largest batch measured).
    edge_fit: LinearFit | None = None
    #: The activations saved for backward against the batch size.
    activations_fit: LinearFit | None = None
    #: The activations' part of the binding line's per-sample slope (0..1).
    activation_share: float | None = None
    #: Whether activation checkpointing pays here (analyze/memory_fit.py, `CHECKPOINT_PAYS_SHARE`).
    checkpointing_pays: bool | None = None
    #: What the process holds besides the step's tensors on the CPU (mean over the steps of
    #: the resident set at the step's start less the tensors resident then; None on a GPU).
    #: A cap on the resident set (the tuner's on the CPU) leaves the step this much less:
    #: `predict_max_batch(plan, cap - plan.process_base_bytes)`.
    process_base_bytes: float | None = None
    budget_bytes: int | None = None
    #: The largest batch whose predicted footprint fits the budget (None: no budget given).
    max_batch: int | None = None
    #: The largest batch under the budget were no activations kept: what checkpointing can
    #: approach and never pass.
    max_batch_without_activations: int | None = None
    #: The real out-of-memory edge under the budget, where it was measured (`--check-edge`).
    oom_edge: OomEdge | None = None

    def footprint_at(self, batch_size: float) -> float:
        """The predicted footprint of a step at `batch_size` (bytes)."""
        return max(fit.at(batch_size) for fit in self.envelope)
