"""Measure this machine's ceilings: peak matmul FLOP/s per dtype and memory bandwidth.

These are the roofs every roofline in torchdoctor is drawn against, so they are *measured*,
never taken from a datasheet, and cached per machine fingerprint
(`torchdoctor.core.env.fingerprint_key`) in the user cache directory.

A ceiling is a peak, so it is measured as one: the work runs warm (WARMUP_S first, so that the
CPU clock and the caches settle and lazily built kernels exist) and is then timed in
SUSTAINED_BLOCKS blocks of at least BLOCK_S each; the ceiling is the best block. A median of
short blocks measured from cold under-reads it: on the project's 2-core host `env` gave 144
GFLOP/s fp32 where a hand-timed 2048^3 loop, once warm, gave 157-173. Each block lasts long
enough to be sustained work, not one lucky call.

- Matmul: `a @ b` on square n x n matrices; one matmul is 2 n^3 FLOP (n^3 multiply-adds).
  n is the largest of the device's sizes (CPU_MATMUL_SIZES, GPU_MATMUL_SIZES) whose single
  call stays under MAX_MATMUL_CALL_S, judged from a quick probe at the smallest size (so slow
  dtypes, bf16/fp16 on many CPUs, stay quick), and whose operands fit the GPU's free memory.
  On CUDA devices of compute capability 8.0 and later a "tf32" peak is measured too: float32
  matmuls with TF32 allowed, the peak cuDNN's default float32 convolutions run against.
- Bandwidth: `dst.copy_(src)` on buffers far larger than any last-level cache; each copy
  reads and writes the buffer once, so bytes moved = 2 x buffer size (the STREAM "copy"
  convention, McCalpin, https://www.cs.virginia.edu/stream/ref.html).

Ceilings measured while other work shared the machine (`core.load`) are returned labelled
disturbed and are not cached: they describe the machine under someone else's load.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from torchdoctor.core.env import Ceilings, cache_dir, fingerprint, fingerprint_key
from torchdoctor.core.errors import EnvError, RecordError
from torchdoctor.core.log import get_logger
from torchdoctor.core.vocabulary import Clock
from torchdoctor.measure._device_timer import make_block_timer
from torchdoctor.measure._gpu_blocks import block_seconds_per_call, clock_summary, nvml_sampler
from torchdoctor.measure._sync import make_sync
from torchdoctor.measure.load import LoadProbe, watch_load

log = get_logger(__name__)

#: Candidate CPU matrix sizes; 2048 is where an fp32 CPU matmul is compute-bound and it is the
#: size the README's "within 15% of a hand-timed a @ b" check uses.
CPU_MATMUL_SIZES: Final = (512, 1024, 2048)
#: GPU sizes: tensor-core GPUs (A100/H100 class) reach their fp16/bf16 peak only at sizes of
#: 4096-8192 (at 2048 an H100 fp16 matmul is launch- and tail-bound well below its peak).
GPU_MATMUL_SIZES: Final = (1024, 2048, 4096, 8192)
#: Backward-compatible name: the CPU sizes.
MATMUL_SIZES: Final = CPU_MATMUL_SIZES
#: Share of the GPU's free memory the three matmul operands may take.
GPU_MEMORY_FRACTION: Final = 0.5
#: Largest single matmul call we accept when choosing the size (keeps `env` under ~30 s).
MAX_MATMUL_CALL_S: Final = 1.0
#: Warm-up before timing: turbo and power-state transitions and thread-pool spin-up settle
#: within a fraction of a second; two seconds cover them with margin and match what a person's
#: warm hand loop has behind it (the loops that beat earlier, shorter measurements did so only
#: "once warm").
WARMUP_S: Final = 2.0
#: Timed work per ceiling: up to SUSTAINED_BLOCKS blocks of at least RUN_TIME_S /
#: SUSTAINED_BLOCKS, the best of which is the ceiling. 0.5 s blocks over 4 s: a peak is the
#: best of several windows, and with 5 blocks of 0.3 s the fp32 figure on the 2-core
#: development host varied 148-177 GFLOP/s run to run while a hand loop's best 0.5 s window of
#: ten gave 169-173.
RUN_TIME_S: Final = 4.0
#: Blocks timed after the warm-up; enough that one or two hit by a scheduler hiccup leave
#: clean ones.
SUSTAINED_BLOCKS: Final = 8
#: A call slower than a block (fp16 matmuls on a CPU without fp16 units take seconds) stops
#: after this many blocks once RUN_TIME_S is spent, so `env` stays within a minute.
MIN_BLOCKS: Final = 3
#: Statistic recorded in `Ceilings.method`; a cached record with another statistic (the
#: median of version 1) is re-measured.
STATISTIC: Final = "best of sustained warm blocks"
#: Copy buffer: 256 MiB is several times the largest server last-level caches (~100 MB), so
#: the copy streams from DRAM (or HBM on a GPU) rather than from cache.
COPY_BYTES: Final = 256 * 2**20
#: Compute capability from which NVIDIA GPUs run TF32 on tensor cores (Ampere, sm_80).
TF32_MIN_CAPABILITY: Final = (8, 0)
#: The "dtype" name of the TF32 peak (the key analyze.ops reads for float32 convolutions).
TF32: Final = "tf32"

Progress = Callable[[str], None]


def sustained_seconds_per_call(
    call: Callable[[], None],
    *,
    sync: Callable[[], None],
    clock: Clock = time.perf_counter,
    warmup_s: float = WARMUP_S,
    run_time: float = RUN_TIME_S,
    blocks: int = SUSTAINED_BLOCKS,
) -> float:
    """Seconds per call of `call` at its sustained best: warm, then the best of `blocks`.

    Each block runs whole calls until at least run_time / blocks has passed (device work
    drained by `sync` before the clock is read), and scores its mean seconds per call.
    """
    block_s = run_time / max(blocks, 1)
    start = clock()
    call()
    sync()
    while clock() - start < warmup_s:
        call()
        sync()
    best = float("inf")
    timed = 0.0
    for done in range(max(blocks, 1)):
        if done >= MIN_BLOCKS and timed >= run_time:
            break  # slow calls: each block is one long call, and run_time is spent
        calls = 0
        t0 = clock()
        while True:
            call()
            calls += 1
            sync()
            elapsed = clock() - t0
            if elapsed >= block_s:
                break
        best = min(best, elapsed / calls)
        timed += elapsed
    return best


def _dtypes_for(device: str) -> list[str]:
    import torch

    if device == "cuda":
        names = ["float32", "float16"]
        if torch.cuda.is_bf16_supported():
            names.append("bfloat16")
        if torch.version.hip is None and torch.cuda.get_device_capability() >= TF32_MIN_CAPABILITY:
            names.append(TF32)
        return names
    return ["float32", "bfloat16", "float16"]


def _supports_matmul(device: str, dtype_name: str) -> bool:
    import torch

    torch_dtype = "float32" if dtype_name == TF32 else dtype_name
    try:
        a = torch.ones(8, 8, device=device, dtype=getattr(torch, torch_dtype))
        _ = a @ a
    except (RuntimeError, TypeError):
        return False
    return True


@contextlib.contextmanager
def _fp32_matmul_precision(tf32: bool) -> Iterator[None]:
    """float32 CUDA matmuls in TF32 (`tf32`) or IEEE float32, restored afterwards."""
    import torch

    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # torch >= 2.9: allow_tf32 is deprecated
        before = matmul.fp32_precision
        matmul.fp32_precision = "tf32" if tf32 else "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision = before
        return
    old = matmul.allow_tf32
    matmul.allow_tf32 = tf32
    try:
        yield
    finally:
        matmul.allow_tf32 = old


def _device_seconds(
    call: Callable[[], None],
    device: str,
    *,
    run_time: float,
    warmup_s: float,
    notes: dict[str, Any] | None = None,
) -> float:
    """Sustained seconds per call. On CUDA, blocks of calls queued between two events with one
    wait each (measure/_gpu_blocks.py), the burst figure and the clocks going to `notes`; on
    a CPU, the host clock around whole calls (the wait is a no-op there)."""
    if device != "cuda":
        return sustained_seconds_per_call(
            call, sync=make_sync(device), warmup_s=warmup_s, run_time=run_time
        )
    times = block_seconds_per_call(
        call,
        timer=make_block_timer(device),
        sync=make_sync(device),
        warmup_s=warmup_s,
        run_time=run_time,
        blocks=SUSTAINED_BLOCKS,
        sample=nvml_sampler(),
    )
    if notes is not None:
        notes["burst_s"] = times.burst_s
        notes["clocks"] = clock_summary(times.clocks)
    return times.sustained_s


def _matmul_seconds(
    device: str,
    dtype_name: str,
    n: int,
    run_time: float,
    warmup_s: float = WARMUP_S,
    notes: dict[str, Any] | None = None,
) -> float:
    import torch

    gen = torch.Generator(device=device).manual_seed(0)
    dtype = torch.float32 if dtype_name == TF32 else getattr(torch, dtype_name)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    out = torch.empty(n, n, device=device, dtype=dtype)

    def call() -> None:
        torch.matmul(a, b, out=out)

    precision = (
        _fp32_matmul_precision(dtype_name == TF32)
        if device == "cuda" and dtype == torch.float32
        else contextlib.nullcontext()
    )
    with precision:
        return _device_seconds(call, device, run_time=run_time, warmup_s=warmup_s, notes=notes)


def _fits_memory(device: str, dtype_name: str, n: int) -> bool:
    """Whether three n x n operands fit GPU_MEMORY_FRACTION of the device's free memory."""
    if device != "cuda":
        return True
    import torch

    itemsize = 4 if dtype_name == TF32 else getattr(torch, dtype_name).itemsize
    free, _total = torch.cuda.mem_get_info()
    return 3 * n * n * itemsize <= GPU_MEMORY_FRACTION * free


def measure_matmul_flops(
    device: str,
    dtype_name: str,
    *,
    sizes: Sequence[int],
    run_time: float,
    warmup_s: float = WARMUP_S,
    notes: dict[str, Any] | None = None,
) -> tuple[float, int]:
    """(FLOP/s, n) for the largest size in `sizes` whose call fits MAX_MATMUL_CALL_S; on
    CUDA the burst seconds and clocks of the timed size go to `notes`."""
    probe_n = sizes[0]
    # The probe only chooses the size: short, and with a short warm-up.
    probe_s = _matmul_seconds(device, dtype_name, probe_n, run_time / 4, warmup_s / 4)
    # Matmul time grows as n^3, so the probe predicts every larger size.
    fitting = [
        n
        for n in sizes
        if probe_s * (n / probe_n) ** 3 <= MAX_MATMUL_CALL_S and _fits_memory(device, dtype_name, n)
    ]
    n = max(fitting) if fitting else probe_n
    seconds = _matmul_seconds(device, dtype_name, n, run_time, warmup_s, notes=notes)
    return 2.0 * n**3 / seconds, n


def measure_copy_bandwidth(
    device: str,
    *,
    nbytes: int,
    run_time: float,
    warmup_s: float = WARMUP_S,
    notes: dict[str, Any] | None = None,
) -> float:
    """Bytes per second moved by a large device-to-same-device copy (read + write)."""
    import torch

    numel = nbytes // 4
    src = torch.ones(numel, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)

    def call() -> None:
        dst.copy_(src)

    seconds = _device_seconds(call, device, run_time=run_time, warmup_s=warmup_s, notes=notes)
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
    sizes: Sequence[int] | None = None,
    copy_bytes: int = COPY_BYTES,
    run_time: float = RUN_TIME_S,
    warmup_s: float = WARMUP_S,
    progress: Progress | None = None,
    load_probe: LoadProbe | None = None,
) -> Ceilings:
    """Measure (no cache) the ceilings of `device`, and the machine's load meanwhile."""
    device = _check_device(device)
    sizes = sizes or (GPU_MATMUL_SIZES if device == "cuda" else CPU_MATMUL_SIZES)
    say = progress or (lambda _msg: None)
    peaks: dict[str, float] = {}
    chosen: dict[str, int] = {}
    notes: dict[str, dict[str, Any]] = {}
    with watch_load(load_probe) as load:
        for dtype_name in _dtypes_for(device):
            if not _supports_matmul(device, dtype_name):
                continue
            say(f"matmul {dtype_name}")
            notes[dtype_name] = {}
            peaks[dtype_name], chosen[dtype_name] = measure_matmul_flops(
                device,
                dtype_name,
                sizes=sizes,
                run_time=run_time,
                warmup_s=warmup_s,
                notes=notes[dtype_name],
            )
        say("memory bandwidth")
        notes["copy"] = {}
        bandwidth = measure_copy_bandwidth(
            device, nbytes=copy_bytes, run_time=run_time, warmup_s=warmup_s, notes=notes["copy"]
        )
    method: dict[str, Any] = {
        "matmul": "a @ b, square, 2*n^3 FLOP",
        "matmul_n": chosen,
        "copy": "dst.copy_(src), bytes = 2 * buffer",
        "copy_bytes": copy_bytes,
        "warmup_s": warmup_s,
        "run_time_s": run_time,
        "blocks": SUSTAINED_BLOCKS,
        "statistic": STATISTIC,
    }
    if TF32 in peaks:
        method["tf32"] = "float32 operands, TF32 tensor-core matmul allowed"
    if device == "cuda":
        method.update(_gpu_method(peaks, chosen, bandwidth, copy_bytes, notes))
    return Ceilings(
        device=device,
        device_name=_device_name(device),
        peak_flops=peaks,
        mem_bandwidth_bytes_per_s=bandwidth,
        source="measured",
        fingerprint_key=fingerprint_key(),
        measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        method=method,
        machine_load=load.reading,
    )


def _gpu_method(
    peaks: dict[str, float],
    chosen: dict[str, int],
    bandwidth: float,
    copy_bytes: int,
    notes: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """How a GPU's figures were timed, the burst figures beside the sustained ceilings, and
    the clocks they ran at (NVML; absent without it)."""
    burst: dict[str, float] = {}
    for dtype_name, n in chosen.items():
        burst_s = notes.get(dtype_name, {}).get("burst_s")
        if burst_s:
            burst[dtype_name] = 2.0 * n**3 / burst_s
    copy_burst = notes.get("copy", {}).get("burst_s")
    out: dict[str, Any] = {
        "timing": "CUDA events around blocks of queued calls, one wait per block",
        "burst_flops": burst,
        "sustained_flops": dict(peaks),
    }
    if copy_burst:
        out["burst_bandwidth_bytes_per_s"] = 2.0 * (copy_bytes // 4) * 4 / copy_burst
        out["sustained_bandwidth_bytes_per_s"] = bandwidth
    clocks = {k: v["clocks"] for k, v in notes.items() if v.get("clocks")}
    if clocks:
        out["clocks"] = clocks
    return out


def get_ceilings(
    *, refresh: bool = False, device: str = "cpu", progress: Progress | None = None
) -> Ceilings:
    """This machine's ceilings for `device`: from the cache, or measured (~30 s on CPU).

    Measured ceilings are cached only when the machine was quiet meanwhile; disturbed ones are
    returned (labelled by their `machine_load`) and measured again next time. A cached record
    measured by another method (version 1's median of short blocks) is measured again.
    """
    kind = _check_device(device)
    path = cache_dir() / f"ceilings-{kind}-{fingerprint_key()}.json"
    if path.exists() and not refresh:
        try:
            cached = Ceilings.read(path)
        except RecordError as exc:
            log.warning("re-measuring ceilings: cached file unusable (%s)", exc)
        else:
            if cached.method.get("statistic") == STATISTIC:
                return cached
            log.info("re-measuring ceilings: cached ones were measured by an older method")
    ceilings = measure_ceilings(kind, progress=progress)
    if ceilings.disturbed:
        load = ceilings.machine_load
        log.warning(
            "ceilings not cached: %s", load.warning if load is not None else "machine disturbed"
        )
        return ceilings
    ceilings.write(path)
    return ceilings
