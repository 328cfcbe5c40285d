"""Rich tables of the machine and its ceilings (terminal output of `torchdoctor env`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from torchdoctor.core.env import Ceilings, EnvFingerprint


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
    for dtype, flops in c.peak_flops.items():
        n = c.method.get("matmul_n", {}).get(dtype)
        table.add_row(f"matmul {dtype}" + (f" (n={n})" if n else ""), f"{flops / 1e9:.1f} GFLOP/s")
    table.add_row("memory bandwidth (copy)", f"{c.mem_bandwidth_bytes_per_s / 1e9:.2f} GB/s")
    if c.disturbed:
        table.add_row("[yellow]DISTURBED[/]", "[yellow]not cached[/]")
    return table


def render_env(console: Console, fp: EnvFingerprint, ceilings: Ceilings) -> None:
    console.print(fingerprint_table(fp))
    console.print(ceilings_table(ceilings))
    if ceilings.machine_load is not None and ceilings.machine_load.warning:
        console.print(f"[yellow]warning:[/] {ceilings.machine_load.warning}", highlight=False)
