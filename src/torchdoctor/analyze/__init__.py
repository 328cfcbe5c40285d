"""Stage: analyze (see docs/DESIGN.md). Trace -> typed timeline -> `TraceAnalysis`.

    from torchdoctor.analyze import analyze_trace, load_trace, TraceAnalysis
    result = analyze_trace("trace.json.gz")          # or a folder of per-rank traces
    result.device_timeline.idle_pct, result.step_breakdown["DataLoader"]

One module per analysis: decode (the one reader: msgspec, bounded chunks, one reducer),
loading (columns -> `Timeline`, folders of per-rank traces), timeline (the compact columns),
steps, step_samples (each step's categories, ops and kernels, for diffs), devicetime,
breakdown, ops (with the per-dtype roofline), launches, hostops (tiny host op calls), syncs,
idle, ranks (a job's ranks compared: `cross_rank_analysis`), fsdp (a rank's FSDP2
all-gathers and reduce-scatters, per unit: `FsdpAnalysis`); `devices` holds datasheet
ceilings as `core.env.Ceilings` records. memory (a step's memory split into its owners, the
fit against the batch size, `predict_max_batch`) and memory_study (measured at a few batch
sizes; the measured edge under a cap) load on first use, since measuring runs torch.
"""

from typing import TYPE_CHECKING

from torchdoctor.analyze.api import analyze_ranks, analyze_timeline, analyze_trace
from torchdoctor.analyze.fsdp_records import ROOT as FSDP_ROOT
from torchdoctor.analyze.fsdp_records import FsdpAnalysis, FsdpUnit
from torchdoctor.analyze.loading import load_rank_traces, load_trace
from torchdoctor.analyze.rank_records import CrossRankAnalysis, RankPhases, Straggler
from torchdoctor.analyze.ranks import cross_rank_analysis
from torchdoctor.analyze.records import STEP_CATEGORIES, CeilingsInfo, OpRow, TraceAnalysis
from torchdoctor.analyze.step_samples import StepSamples, timeline_step_samples, trace_step_samples
from torchdoctor.analyze.timeline import Kind, Timeline
from torchdoctor.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from torchdoctor.analyze.memory_fit import (
        owners_plan,
        plan_memory,
        predict_max_batch,
        split_owners,
    )
    from torchdoctor.analyze.memory_study import (
        measured_edge,
        oom_edge,
        study_memory,
        under_cap,
    )
    from torchdoctor.analyze.shard_memory import (
        DEFAULT_PREFETCH,
        Moments,
        plan_shards,
        rank_memory,
        step_moments,
    )
    from torchdoctor.analyze.shard_memory_study import estimate_shards

_LAZY_EXPORTS = {
    "owners_plan": "torchdoctor.analyze.memory_fit",
    "plan_memory": "torchdoctor.analyze.memory_fit",
    "predict_max_batch": "torchdoctor.analyze.memory_fit",
    "split_owners": "torchdoctor.analyze.memory_fit",
    "measured_edge": "torchdoctor.analyze.memory_study",
    "oom_edge": "torchdoctor.analyze.memory_study",
    "study_memory": "torchdoctor.analyze.memory_study",
    "under_cap": "torchdoctor.analyze.memory_study",
    "DEFAULT_PREFETCH": "torchdoctor.analyze.shard_memory",
    "Moments": "torchdoctor.analyze.shard_memory",
    "plan_shards": "torchdoctor.analyze.shard_memory",
    "step_moments": "torchdoctor.analyze.shard_memory",
    "rank_memory": "torchdoctor.analyze.shard_memory",
    "estimate_shards": "torchdoctor.analyze.shard_memory_study",
}

__all__ = [
    "DEFAULT_PREFETCH",
    "FSDP_ROOT",
    "STEP_CATEGORIES",
    "CeilingsInfo",
    "CrossRankAnalysis",
    "FsdpAnalysis",
    "FsdpUnit",
    "Kind",
    "Moments",
    "OpRow",
    "RankPhases",
    "StepSamples",
    "Straggler",
    "Timeline",
    "TraceAnalysis",
    "analyze_ranks",
    "analyze_timeline",
    "analyze_trace",
    "cross_rank_analysis",
    "estimate_shards",
    "load_rank_traces",
    "load_trace",
    "measured_edge",
    "oom_edge",
    "owners_plan",
    "plan_memory",
    "plan_shards",
    "predict_max_batch",
    "rank_memory",
    "split_owners",
    "step_moments",
    "study_memory",
    "timeline_step_samples",
    "trace_step_samples",
    "under_cap",
]

__getattr__ = lazy_getattr(__name__, _LAZY_EXPORTS)
