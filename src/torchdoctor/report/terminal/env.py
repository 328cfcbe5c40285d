"""The environment section on a terminal: the machine and its measured ceilings as rich
tables (what `torchdoctor env` prints, and the environment of a run folder)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from torchdoctor.core.env import Ceilings, EnvFingerprint
from torchdoctor.report.registry import JsonDict


@dataclass(frozen=True)
class Machine:
    """The environment section's terminal view: the fingerprint and ceilings, validated."""

    fingerprint: EnvFingerprint
    ceilings: Ceilings


def machine_view(env: dict[str, JsonDict]) -> Machine | None:
    """env.json's two parts as records (None: no env.json, e.g. a diagnosis's own ceilings,
    which the page shows and a terminal leaves to `torchdoctor env`)."""
    if "fingerprint" not in env or "ceilings" not in env:
        return None
    return Machine(
        EnvFingerprint.from_json_dict(env["fingerprint"]), Ceilings.from_json_dict(env["ceilings"])
    )


def fingerprint_table(fp: EnvFingerprint) -> Table:
    table = Table(title="Machine", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    cores = f"{fp.cores_physical or '?'} physical / {fp.cores_logical} logical"
    build = ", ".join(
        name
        for name, on in (
            (f"CUDA {fp.torch_cuda}", fp.torch_cuda),
            (f"ROCm {fp.torch_hip}", fp.torch_hip),
            ("MKL", fp.torch_mkl),
            ("oneDNN", fp.torch_mkldnn),
            ("OpenMP", fp.torch_openmp),
        )
        if on
    )
    rows = [
        ("CPU", f"{fp.cpu_model} ({fp.cpu_arch})"),
        ("cores", cores),
        ("SIMD / matrix", " ".join(fp.cpu_flags) or "none detected"),
        ("OS / Python", f"{fp.os} / {fp.python}"),
        ("torch", f"{fp.torch_version} ({build or 'CPU'}); {fp.intra_op_threads} threads"),
    ]
    for dev in fp.cuda_devices:
        rows.append(
            (
                f"cuda:{dev.index}",
                f"{dev.name}, sm {dev.compute_capability}, "
                f"{dev.total_memory_bytes / 2**30:.1f} GiB, driver {dev.driver or '?'}",
            )
        )
    for name, value in rows:
        table.add_row(name, value)
    return table


def ceilings_table(c: Ceilings) -> Table:
    table = Table(title=f"Ceilings of {c.device} ({c.source}, {c.measured_at or 'undated'})")
    table.add_column("ceiling")
    table.add_column("value", justify="right")
    burst = c.method.get("burst_flops") or {}
    clocks = c.method.get("clocks") or {}
    for dtype, flops in c.peak_flops.items():
        n = c.method.get("matmul_n", {}).get(dtype)
        value = f"{flops / 1e9:.1f} GFLOP/s"
        if burst.get(dtype):  # a GPU's: sustained, then its burst and the clocks it ran at
            value += f" (burst {burst[dtype] / 1e9:.1f}{_clocks(clocks.get(dtype))})"
        table.add_row(f"matmul {dtype}" + (f" (n={n})" if n else ""), value)
    copy = f"{c.mem_bandwidth_bytes_per_s / 1e9:.2f} GB/s"
    copy_burst = c.method.get("burst_bandwidth_bytes_per_s")
    if copy_burst:
        copy += f" (burst {copy_burst / 1e9:.2f})"
    table.add_row("memory bandwidth (copy)", copy)
    if c.disturbed:
        table.add_row("[yellow]DISTURBED[/]", "[yellow]not cached[/]")
    return table


def _clocks(clocks: dict[str, float] | None) -> str:
    """ ", SM 1755-1980 MHz, <=690 W" from NVML's samples, or "" without them."""
    if not clocks:
        return ""
    out = ""
    if "sm_clock_mhz_min" in clocks:
        out += f", SM {clocks['sm_clock_mhz_min']:.0f}-{clocks['sm_clock_mhz_max']:.0f} MHz"
    if "power_w_max" in clocks:
        out += f", <={clocks['power_w_max']:.0f} W"
    return out


def render_env(console: Console, machine: Machine) -> None:
    """The environment section's terminal form: the machine, its ceilings, a disturbance."""
    ceilings = machine.ceilings
    console.print(fingerprint_table(machine.fingerprint))
    console.print(ceilings_table(ceilings))
    if ceilings.machine_load is not None and ceilings.machine_load.warning:
        console.print(f"[yellow]warning:[/] {ceilings.machine_load.warning}", highlight=False)
