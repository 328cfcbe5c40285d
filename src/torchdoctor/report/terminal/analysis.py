"""A `TraceAnalysis` on a terminal (what `torchdoctor analyze` prints): the step section's
form for a trace, with the roofline section's top ops printed within it."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from torchdoctor.analyze import TraceAnalysis


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}%"


def _si(x: float | None, unit: str) -> str:
    if x is None:
        return "-"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.1f} {prefix}{unit}"
    return f"{x:.0f} {unit}"


def _ms(us: float) -> str:
    return f"{us / 1000:.3f} ms"


def _verdict(r: TraceAnalysis) -> str:
    dt = r.device_timeline
    if dt is not None:
        if dt.idle_pct > 50:
            wait = r.idle
            cause = ""
            if wait is not None and wait.idle_us > 0:
                cause = f", {100 * wait.host_wait_us / wait.idle_us:.0f}% of it waiting on the host"
            return f"device idle {dt.idle_pct:.1f}% of the window{cause}"
        if dt.exposed_comm_pct > 10:
            return f"exposed communication {dt.exposed_comm_pct:.1f}% of the window"
        return f"device busy {dt.busy_pct:.1f}% (computation {dt.computation_pct:.1f}%)"
    if r.step_breakdown:
        top = max(r.step_breakdown.items(), key=lambda kv: kv[1])
        return f"CPU-only trace; largest share of step time: {top[0]} {top[1]:.1f}%"
    return "CPU-only trace without ProfilerStep markers"


def render_analysis(r: TraceAnalysis, console: Console) -> None:
    """A trace analysis: verdict, device timeline, step breakdown, top ops, launches, syncs."""
    console.print(f"[bold]{r.source}[/]  device: {r.device_name or 'none'}  rank: {r.rank}")
    console.print(f"[bold]verdict:[/] {_verdict(r)}")
    console.print(f"[dim]{r.ceilings_note}[/]")
    if r.device_timeline is not None:
        dt = r.device_timeline
        t = Table(title=f"device timeline ({dt.total_us / 1000:.2f} ms window)")
        for col in ("busy", "computation", "exposed memcpy", "exposed comm", "idle"):
            t.add_column(col, justify="right")
        t.add_row(
            _pct(dt.busy_pct),
            _pct(dt.computation_pct),
            _pct(dt.exposed_memcpy_pct),
            _pct(dt.exposed_comm_pct),
            _pct(dt.idle_pct),
        )
        console.print(t)
    if r.step_breakdown is not None and r.steps is not None:
        t = Table(title=f"step breakdown ({r.steps.count} steps, mean {r.steps.mean_us:.0f} us)")
        for name in r.step_breakdown:
            t.add_column(name, justify="right")
        t.add_row(*(_pct(v) for v in r.step_breakdown.values()))
        console.print(t)
    render_top_ops(console, r)
    if r.launches is not None:
        ln = r.launches
        delay = ln.launch_delay_us or {}
        console.print(
            f"launches: {ln.kernels} kernels, {ln.kernels_shorter_than_launch_pct:.0f}% shorter "
            f"than their launch call, launch delay p50 {delay.get('p50', 0):.1f} us "
            f"p99 {delay.get('p99', 0):.1f} us, {ln.tiny_kernel_time_pct:.1f}% of kernel time "
            f"in kernels < {ln.tiny_kernel_us:.0f} us"
        )
    if r.host_ops is not None:
        h = r.host_ops
        console.print(
            f"host ops: {h.calls} calls, {h.tiny_calls_pct:.0f}% shorter than "
            f"{h.tiny_op_us:.0f} us, holding {h.tiny_op_time_pct:.1f}% of op time (self)"
        )
    per_step = "" if r.syncs.per_step is None else f" ({r.syncs.per_step:.1f} per step)"
    console.print(f"sync points: {r.syncs.total}{per_step}")
    if r.syncs.host_scalar_reads:
        console.print(
            f"  not counted: {r.syncs.host_scalar_reads} scalar reads of host tensors "
            "(no device wait beneath them)"
        )
    if r.syncs.tool_by_name:
        own = ", ".join(f"{n} x{c}" for n, c in r.syncs.tool_by_name.items())
        console.print(f"  not counted: torchdoctor's own syncs ({own})")
    for c in r.syncs.copies:
        console.print(
            f"  copy {c.direction} {c.memory}: {c.count} x, {_si(c.bytes, 'B')}, "
            f"{c.time_us / 1000:.2f} ms"
        )
    if r.idle is not None and r.idle.idle_us > 0:
        i = r.idle
        console.print(
            f"idle gaps: {i.gaps}, {i.idle_us / 1000:.2f} ms: waiting on host "
            f"{i.host_wait_us / 1000:.2f} ms, between kernels {i.between_kernels_us / 1000:.2f} ms"
        )
    if r.cross_rank is not None:  # a folder of per-rank traces: the ranks compared
        from torchdoctor.report.terminal.sections import render_records

        render_records(console, {"cross_rank": r.cross_rank})


def render_top_ops(console: Console, r: TraceAnalysis) -> None:
    """The roofline section's terminal form: the top ops, their FLOP/s and what bounds them."""
    if r.ops:
        t = Table(title="top ops")
        for col in ("op", "count", "self host", "total host", "device", "FLOPs", "FLOP/s"):
            t.add_column(col, justify="left" if col == "op" else "right")
        t.add_column("bound")
        for o in r.ops:
            t.add_row(
                o.name[:60],
                str(o.count),
                _ms(o.self_host_us),
                _ms(o.total_host_us),
                _ms(o.device_us),
                _si(o.flops, ""),
                _si(o.achieved_flops_per_s, "FLOP/s"),
                o.bound or "-",
            )
        console.print(t)
