"""Stage: scale. Many processes under torchrun: how a job scales, and why not linearly.

- `run_worlds(plan, run_dir, progress)`, `build_study(plan, run_dir)` -> `ScalingStudy`: torchrun
  at each world size (a built-in workload or a user's script), the collective microbenchmark
  at each N >= 2, the measured step per N against linear scaling and against the model.
- `fit_alpha_beta`, `bus_factor`, `bus_bandwidth`: a collective's latency and bandwidth
  (NCCL-tests' bus bandwidth).
- `ScalingModel`, `project`, `projections`: T(N) = compute + (communication - overlap) +
  optimizer + data + skew, to other world sizes, bandwidths, and a parameter server vs a ring.
- `fsdp_collectives`, `fsdp_communication`, `compare_strategies`: FSDP2's all-gathers and
  reduce-scatters per step, timed at N from an all-gather fit with a band; DDP, FSDP and FSDP
  with CPU offload side by side (memory per rank, bytes per link).
- `compare_steps`, `ddp_model`, `fsdp_pays_from` -> `StrategyComparison`: an FSDP2 job under
  DDP, FSDP and FSDP with CPU offload in step time at N and a bandwidth, and the size from
  which sharding pays (strategy_steps.py).
- `check_request`, `plan_study` -> `StudyPlan`: every check a study needs before its first job,
  the backend, the threads per rank.
- `Topology`, `torchrun_args`, `check_backend`, `check_rendezvous`: the launch and its checks.
- `two_hosts`: two network namespaces joined by a shaped veth pair (netns.py).
"""

from torchdoctor.scale.buckets import DEFAULT_BUCKET_CAP_MB, ddp_buckets, exposed_communication
from torchdoctor.scale.collectives import FULL_SIZES, QUICK_SIZES, CollectiveBench, CollectivePoint
from torchdoctor.scale.fit import (
    COLLECTIVES,
    AlphaBetaFit,
    Collective,
    bus_bandwidth,
    bus_factor,
    fit_alpha_beta,
)
from torchdoctor.scale.fsdp import (
    FsdpCollective,
    FsdpCommunication,
    compare_strategies,
    fsdp_collectives,
    fsdp_communication,
)
from torchdoctor.scale.launch import (
    Topology,
    check_backend,
    check_rendezvous,
    parse_endpoint,
    torchrun_args,
    warn_oversubscribed,
)
from torchdoctor.scale.plan import check_request, plan_study, usable_cores
from torchdoctor.scale.projection import (
    ARCHITECTURES,
    Architecture,
    Projection,
    ScalingModel,
    project,
    projections,
)
from torchdoctor.scale.runner import StudyPlan, build_study, run_worlds, world_dir
from torchdoctor.scale.strategy_steps import (
    StrategyComparison,
    StrategyStep,
    compare_steps,
    ddp_model,
    fsdp_pays_from,
)
from torchdoctor.scale.study import (
    COLOCATION_BAR,
    COMMUNICATION_BAR,
    SKEW_BAR,
    GapPart,
    ScalingStudy,
    WorldResult,
)
from torchdoctor.scale.worlds import (
    SCALING_MODES,
    MeasuredWorld,
    ScalingMode,
    karp_flatt,
    measured_world,
)

__all__ = [
    "ARCHITECTURES",
    "COLLECTIVES",
    "COLOCATION_BAR",
    "COMMUNICATION_BAR",
    "DEFAULT_BUCKET_CAP_MB",
    "FULL_SIZES",
    "QUICK_SIZES",
    "SCALING_MODES",
    "SKEW_BAR",
    "AlphaBetaFit",
    "Architecture",
    "Collective",
    "CollectiveBench",
    "CollectivePoint",
    "FsdpCollective",
    "FsdpCommunication",
    "GapPart",
    "MeasuredWorld",
    "Projection",
    "ScalingMode",
    "ScalingModel",
    "ScalingStudy",
    "StrategyComparison",
    "StrategyStep",
    "StudyPlan",
    "Topology",
    "WorldResult",
    "build_study",
    "bus_bandwidth",
    "bus_factor",
    "check_backend",
    "check_rendezvous",
    "check_request",
    "compare_steps",
    "compare_strategies",
    "ddp_buckets",
    "ddp_model",
    "exposed_communication",
    "fit_alpha_beta",
    "fsdp_collectives",
    "fsdp_communication",
    "fsdp_pays_from",
    "karp_flatt",
    "measured_world",
    "parse_endpoint",
    "plan_study",
    "project",
    "projections",
    "run_worlds",
    "torchrun_args",
    "usable_cores",
    "warn_oversubscribed",
    "world_dir",
]
