"""Measure this machine's ceilings: peak matmul FLOP/s per dtype and memory bandwidth.

These are the roofs every roofline in torchdoctor is drawn against, so they are *measured*
with the same Timer as everything else, never taken from a datasheet, and cached per machine
fingerprint (`torchdoctor.core.env.fingerprint_key`) in the user cache directory.

- Matmul: `a @ b` on square n x n matrices; one matmul is 2 n^3 FLOP (n^3 multiply-adds).
  n is the largest of MATMUL_SIZES whose single call stays under MAX_MATMUL_CALL_S, judged from
  a quick probe at the smallest size, so slow dtypes (bf16/fp16 on many CPUs) stay quick.
- Bandwidth: `dst.copy_(src)` on buffers far larger than any last-level cache; each copy
  reads and writes the buffer once, so bytes moved = 2 x buffer size (the STREAM "copy"
  convention, McCalpin, https://www.cs.virginia.edu/stream/ref.html).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, Final

from torchdoctor.core.env import Ceilings, cache_dir, fingerprint, fingerprint_key
from torchdoctor.core.errors import EnvError, RecordError
from torchdoctor.core.log import get_logger
from torchdoctor.measure._timer import Timer

log = get_logger(__name__)

#: Candidate matrix sizes; 2048 is where an fp32 CPU matmul is compute-bound and it is the
#: size the README's "within 15% of a hand-timed a @ b" check uses.
MATMUL_SIZES: Final = (512, 1024, 2048)
#: Largest single matmul call we accept when choosing the size (keeps `env` under ~20 s).
MAX_MATMUL_CALL_S: Final = 1.0
#: Timed work per ceiling (torch.utils.benchmark's blocked_autorange takes 0.2 s by default;
#: longer here because these numbers are cached and reused by every roofline).
RUN_TIME_S: Final = 1.0
#: Copy buffer: 256 MiB is several times the largest server last-level caches (~100 MB), so
#: the copy streams from DRAM (or HBM on a GPU) rather than from cache.
COPY_BYTES: Final = 256 * 2**20

Progress = Callable[[str], None]


def _dtypes_for(device: str) -> list[str]:
    import torch

    if device == "cuda":
        names = ["float32", "float16"]
        if torch.cuda.is_bf16_supported():
            names.append("bfloat16")
        return names
    return ["float32", "bfloat16", "float16"]


def _supports_matmul(device: str, dtype_name: str) -> bool:
    import torch

    try:
        a = torch.ones(8, 8, device=device, dtype=getattr(torch, dtype_name))
        _ = a @ a
    except (RuntimeError, TypeError):
        return False
    return True


def _matmul_seconds(device: str, dtype_name: str, n: int, run_time: float) -> float:
    import torch

    gen = torch.Generator(device=device).manual_seed(0)
    dtype = getattr(torch, dtype_name)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    timer = Timer("a @ b", globals={"a": a, "b": b}, device=device, label=f"matmul {n}")
    return timer.blocked_autorange(min_run_time=run_time).median


def measure_matmul_flops(
    device: str, dtype_name: str, *, sizes: Sequence[int], run_time: float
) -> tuple[float, int]:
    """(FLOP/s, n) for the largest size in `sizes` whose call fits MAX_MATMUL_CALL_S."""
    probe_n = sizes[0]
    probe_s = _matmul_seconds(device, dtype_name, probe_n, run_time / 4)
    # Matmul time grows as n^3, so the probe predicts every larger size.
    fitting = [n for n in sizes if probe_s * (n / probe_n) ** 3 <= MAX_MATMUL_CALL_S]
    n = max(fitting) if fitting else probe_n
    seconds = probe_s if n == probe_n else _matmul_seconds(device, dtype_name, n, run_time)
    return 2.0 * n**3 / seconds, n


def measure_copy_bandwidth(device: str, *, nbytes: int, run_time: float) -> float:
    """Bytes per second moved by a large device-to-same-device copy (read + write)."""
    import torch

    numel = nbytes // 4
    src = torch.ones(numel, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    timer = Timer("dst.copy_(src)", globals={"src": src, "dst": dst}, device=device)
    seconds = timer.blocked_autorange(min_run_time=run_time).median
    return 2.0 * numel * 4 / seconds


def _device_name(device: str) -> str:
    import torch

    if device == "cuda":
        return str(torch.cuda.get_device_name(0))
    return fingerprint().cpu_model


def _check_device(device: str) -> str:
    import torch

    kind = device.split(":", 1)[0].lower()
    if kind == "cuda" and not torch.cuda.is_available():
        raise EnvError("device 'cuda' requested but no CUDA device is available", hint="use cpu")
    if kind not in ("cpu", "cuda"):
        raise EnvError(f"unknown device {device!r}", hint="use 'cpu' or 'cuda'")
    return kind


def measure_ceilings(
    device: str = "cpu",
    *,
    sizes: Sequence[int] = MATMUL_SIZES,
    copy_bytes: int = COPY_BYTES,
    run_time: float = RUN_TIME_S,
    progress: Progress | None = None,
) -> Ceilings:
    """Measure (no cache) the ceilings of `device`."""
    device = _check_device(device)
    say = progress or (lambda _msg: None)
    peaks: dict[str, float] = {}
    chosen: dict[str, int] = {}
    for dtype_name in _dtypes_for(device):
        if not _supports_matmul(device, dtype_name):
            continue
        say(f"matmul {dtype_name}")
        peaks[dtype_name], chosen[dtype_name] = measure_matmul_flops(
            device, dtype_name, sizes=sizes, run_time=run_time
        )
    say("memory bandwidth")
    bandwidth = measure_copy_bandwidth(device, nbytes=copy_bytes, run_time=run_time)
    method: dict[str, Any] = {
        "matmul": "a @ b, square, 2*n^3 FLOP",
        "matmul_n": chosen,
        "copy": "dst.copy_(src), bytes = 2 * buffer",
        "copy_bytes": copy_bytes,
        "run_time_s": run_time,
        "statistic": "median",
    }
    return Ceilings(
        device=device,
        device_name=_device_name(device),
        peak_flops=peaks,
        mem_bandwidth_bytes_per_s=bandwidth,
        source="measured",
        fingerprint_key=fingerprint_key(),
        measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        method=method,
    )


def get_ceilings(
    *, refresh: bool = False, device: str = "cpu", progress: Progress | None = None
) -> Ceilings:
    """This machine's ceilings for `device`: from the cache, or measured (~10-20 s on CPU)."""
    kind = _check_device(device)
    path = cache_dir() / f"ceilings-{kind}-{fingerprint_key()}.json"
    if path.exists() and not refresh:
        try:
            return Ceilings.read(path)
        except RecordError as exc:
            log.warning("re-measuring ceilings: cached file unusable (%s)", exc)
    ceilings = measure_ceilings(kind, progress=progress)
    ceilings.write(path)
    return ceilings
