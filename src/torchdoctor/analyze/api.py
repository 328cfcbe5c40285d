"""`analyze_trace`: a trace file, a folder of per-rank traces, or a `Timeline` in; a
`TraceAnalysis` out. Each analysis lives in its own module; this only wires them up.

For a folder, the top-level fields describe the lowest rank and `ranks` summarizes every
rank (device timeline and step breakdown), so rank imbalance shows at a glance, and
`cross_rank` compares them (per-rank step, skew at each collective, stragglers).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from torchdoctor.analyze.attention import handwritten_attention
from torchdoctor.analyze.breakdown import dataloader_iter, step_breakdown
from torchdoctor.analyze.devices import (
    CeilingsLike,
    datasheet_ceilings,
    datasheet_for_generation,
)
from torchdoctor.analyze.devicetime import device_timeline
from torchdoctor.analyze.fsdp import fsdp_analysis
from torchdoctor.analyze.hostops import host_op_stats
from torchdoctor.analyze.idle import idle_stats
from torchdoctor.analyze.kernels import kernel_mix
from torchdoctor.analyze.launches import launch_stats
from torchdoctor.analyze.loading import load_rank_traces
from torchdoctor.analyze.ops import fallback_note, op_table, self_times
from torchdoctor.analyze.ranks import cross_rank_analysis
from torchdoctor.analyze.records import CeilingsInfo, KernelMix, RankSummary, TraceAnalysis
from torchdoctor.analyze.step_windows import device_activity_in_steps, step_windows
from torchdoctor.analyze.syncs import sync_stats
from torchdoctor.analyze.timeline import Kind, Timeline


def _device_kind(device: str) -> str:
    return device.split(":", 1)[0]


def _given_applies(tl: Timeline, ceilings: CeilingsLike) -> str | None:
    """None when the given ceilings describe the trace's device; else why they do not.

    A GPU trace is judged against a GPU's ceilings: this machine's CPU ceilings (what a
    CPU-side caller measured) say nothing about its kernels. Ceilings of a named GPU other
    than the one the trace names do not apply either.
    """
    on_gpu = tl.has_device_activity
    kind = _device_kind(ceilings.device)
    if on_gpu and kind == "cpu":
        return f"the given ceilings are this machine's {kind}'s and the trace ran on a GPU"
    named, theirs = tl.meta.device_name, ceilings.device_name
    if on_gpu and named and theirs and named.strip().upper() != theirs.strip().upper():
        return f"the given ceilings are {theirs!r}'s and the trace ran on {named!r}"
    return None


def _ceilings_for(
    tl: Timeline, ceilings: CeilingsLike | None, mix: KernelMix | None
) -> tuple[CeilingsLike | None, str]:
    """The ceilings the trace's ops are placed against, and a note saying where they came
    from: the given (measured) ones when they describe the trace's device, else the
    datasheet of the device the trace names, else of the generation its kernel names show."""
    prefix = ""
    if ceilings is not None:
        mismatch = _given_applies(tl, ceilings)
        if mismatch is None:
            return ceilings, f"ceilings from {ceilings.source} ({ceilings.device})"
        prefix = f"{mismatch}, so they are not used; "
    sheet = datasheet_ceilings(tl.meta.device_name)
    if sheet is not None:
        return sheet, prefix + (
            f"datasheet ceilings of {sheet.method['model']} (device named in the trace; "
            f"{sheet.method['reference']})"
        )
    if mix is not None and mix.generation is not None and tl.has_device_activity:
        inferred = datasheet_for_generation(mix.generation)
        if inferred is not None:
            return inferred, prefix + (
                f"datasheet ceilings of {inferred.method['model']}, the representative "
                f"{mix.generation} part: the GPU generation is inferred from kernel names "
                f"(e.g. {mix.generation_evidence!r}), the trace does not name its device "
                f"({inferred.method['reference']})"
            )
    if tl.meta.device_name:
        return None, prefix + (
            f"ceilings unknown for device {tl.meta.device_name!r}: no datasheet entry; "
            "roofline classes other than 'overhead' are not given"
        )
    return None, prefix + (
        "ceilings unknown: the trace names no device; pass this machine's ceilings "
        "(torchdoctor env) to classify ops as compute- or memory-bound"
    )


def _capability(tl: Timeline, mix: KernelMix | None) -> tuple[tuple[int, int] | None, str | None]:
    """The CUDA compute capability: deviceProperties', else the one kernel names show."""
    if tl.meta.cuda_capability is not None:
        return tl.meta.cuda_capability, "deviceProperties"
    if mix is not None and mix.capability is not None and tl.meta.device_name is None:
        return mix.capability, "kernel names"
    return None, None


def analyze_timeline(
    tl: Timeline, *, ceilings: CeilingsLike | None = None, top: int | None = None
) -> TraceAnalysis:
    """Every analysis of one timeline (one rank)."""
    windows = step_windows(tl)
    selected = device_activity_in_steps(tl, windows)
    breakdown, steps = step_breakdown(tl, windows)
    mix = kernel_mix(tl, selected)
    used, note = _ceilings_for(tl, ceilings, mix)
    capability, capability_source = _capability(tl, mix)
    info = None
    if used is not None:
        info = CeilingsInfo(
            device=used.device,
            device_name=used.device_name,
            source=used.source,
            peak_flops=dict(used.peak_flops),
            mem_bandwidth_bytes_per_s=used.mem_bandwidth_bytes_per_s,
        )
    cpu_ops = np.flatnonzero(tl.mask(Kind.CPU_OP))
    self_t = self_times(tl, cpu_ops)  # the op table and the tiny-op share both need it
    ops = op_table(tl, used, top, self_t=self_t)
    fallback = fallback_note(ops, used)
    if fallback:
        note = f"{note}; {fallback}"
    return TraceAnalysis(
        source=tl.meta.source,
        device_name=tl.meta.device_name,
        cuda_capability=capability,
        cuda_capability_source=capability_source,
        kernels=mix,
        dataloader_iter=dataloader_iter(tl),
        rank=tl.meta.rank,
        world_size=tl.meta.world_size,
        events=len(tl),
        device_timeline=device_timeline(tl, selected),
        step_breakdown=breakdown,
        steps=steps,
        ops=ops,
        launches=launch_stats(tl, selected),
        host_ops=host_op_stats(tl.dur[cpu_ops], self_t),
        syncs=sync_stats(tl, windows, selected),
        attention=handwritten_attention(tl, steps.count if steps else None),
        fsdp=fsdp_analysis(tl),
        idle=idle_stats(tl, selected),
        ceilings=info,
        ceilings_note=note,
        warnings=list(tl.meta.warnings),
        ranks=[],
    )


def analyze_trace(
    path_or_timeline: str | Path | Timeline,
    *,
    ceilings: CeilingsLike | None = None,
    top: int | None = None,
) -> TraceAnalysis:
    """Analyze a trace file, a folder of per-rank traces, or an already loaded `Timeline`.

    `top` keeps only the N heaviest ops in the op table (all by default). Raises
    `TraceError` for unreadable input.
    """
    if isinstance(path_or_timeline, Timeline):
        return analyze_timeline(path_or_timeline, ceilings=ceilings, top=top)
    return analyze_ranks(path_or_timeline, ceilings=ceilings, top=top)[0]


def analyze_ranks(
    path: str | Path, *, ceilings: CeilingsLike | None = None, top: int | None = None
) -> tuple[TraceAnalysis, list[TraceAnalysis]]:
    """A trace file or a folder of per-rank traces: the whole (as `analyze_trace` returns
    it) and each rank's own analysis, lowest rank first (one for a file)."""
    timelines = load_rank_traces(path)
    results = [analyze_timeline(tl, ceilings=ceilings, top=top) for tl in timelines]
    if len(results) == 1:
        return results[0], results
    ranks = [
        RankSummary(
            rank=r.rank,
            source=r.source,
            device_timeline=r.device_timeline,
            step_breakdown=r.step_breakdown,
        )
        for r in results
    ]
    warnings = [w for r in results for w in r.warnings]
    whole = results[0].model_copy(
        update={
            "source": str(path),
            "ranks": ranks,
            "warnings": warnings,
            "cross_rank": cross_rank_analysis(timelines),
        }
    )
    return whole, results
