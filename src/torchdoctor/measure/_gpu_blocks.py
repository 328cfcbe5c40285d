"""A device ceiling timed as the device runs: blocks of queued calls, one wait per block.

Timing a GPU matmul with a synchronize after every call times the round trip too: the device
idles while the host learns the call finished and launches the next. On an H200 the matmul
ceiling timed that way read 3.5% below `bench` of the same product. Here each block queues
its calls back to back between two CUDA events and waits once, on the block's end event
(`BlockTimer`, measure/_device_timer.py), so the device's own timestamps measure the work.

How many calls a block holds is fixed before it starts (an event's time is only known after
a wait): from one short block right after the warm-up, which is also the *burst* figure (the
clocks at their boost, before power and heat bring them down); the long blocks after it give
the *sustained* one, the ceiling. With NVML (`pynvml`) importable, the SM clock and the board
power are read between blocks, so a reader can see the clocks that produced the figures.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from torchdoctor.measure._device_timer import BlockTimer

#: Share of a sustained block the burst block lasts: short enough to run at boost clocks
#: (GPU boost reacts to power and temperature over tens of milliseconds and more).
BURST_SHARE: Final = 0.1


@dataclass(frozen=True)
class ClockSample:
    sm_mhz: float | None
    power_w: float | None


@dataclass(frozen=True)
class BlockTimes:
    """Seconds per call: the best sustained block (the ceiling), the burst block, and every
    sustained block; the clock samples taken between blocks (empty without NVML)."""

    sustained_s: float
    burst_s: float
    blocks_s: tuple[float, ...]
    clocks: tuple[ClockSample, ...] = field(default=())


def block_seconds_per_call(
    call: Callable[[], None],
    *,
    timer: BlockTimer,
    sync: Callable[[], None],
    clock: Callable[[], float] = time.perf_counter,
    warmup_s: float,
    run_time: float,
    blocks: int,
    sample: Callable[[], ClockSample | None] | None = None,
) -> BlockTimes:
    """Warm up (host clock, a wait per call: only to settle and to estimate), time one burst
    block, then `blocks` sustained blocks of calls queued between two events."""
    block_s = run_time / max(blocks, 1)
    start = clock()
    warm_calls = 0
    while True:
        call()
        sync()
        warm_calls += 1
        if clock() - start >= warmup_s:
            break
    # Over-estimates a call by its wait: blocks come out a little shorter than block_s.
    per_call = max((clock() - start) / warm_calls, 1e-9)
    burst_calls = max(1, math.ceil(BURST_SHARE * block_s / per_call))
    burst = _timed(call, timer, burst_calls)
    calls = max(1, math.ceil(block_s / max(burst, 1e-9)))
    samples: list[ClockSample] = []
    times: list[float] = []
    for _ in range(max(blocks, 1)):
        times.append(_timed(call, timer, calls))
        got = sample() if sample is not None else None
        if got is not None:
            samples.append(got)
    return BlockTimes(min(times), burst, tuple(times), tuple(samples))


def _timed(call: Callable[[], None], timer: BlockTimer, calls: int) -> float:
    timer.start()
    for _ in range(calls):
        call()
    return timer.stop() / calls


def nvml_sampler(index: int = 0) -> Callable[[], ClockSample | None] | None:
    """A reader of the GPU's SM clock and board power through NVML; None without pynvml or
    when NVML cannot open the device (a driver without it, a container without access).

    NVML numbers devices by their place on the PCI bus, CUDA by default fastest first: the
    device is matched by PCI bus id when torch reports one, else NVML's `index` is used."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        handle = _nvml_handle(pynvml, index)
    except Exception:  # pynvml missing, or NVML unusable here: no clocks, the rest stands
        return None

    def sample() -> ClockSample | None:
        mhz = power = None
        with contextlib.suppress(Exception):
            mhz = float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
        with contextlib.suppress(Exception):
            power = float(pynvml.nvmlDeviceGetPowerUsage(handle)) / 1000.0  # reported in mW
        return ClockSample(mhz, power)

    return sample


def _nvml_handle(pynvml: Any, index: int) -> Any:
    import torch

    bus = getattr(torch.cuda.get_device_properties(index), "pci_bus_id", None)
    if isinstance(bus, int):
        domain = getattr(torch.cuda.get_device_properties(index), "pci_domain_id", 0)
        device = getattr(torch.cuda.get_device_properties(index), "pci_device_id", 0)
        text = f"{int(domain):08x}:{bus:02x}:{int(device):02x}.0"
        return pynvml.nvmlDeviceGetHandleByPciBusId_v2(text)
    return pynvml.nvmlDeviceGetHandleByIndex(index)


def clock_summary(samples: tuple[ClockSample, ...]) -> dict[str, float]:
    """Lowest and highest SM clock and highest board power over the samples (what exists)."""
    out: dict[str, float] = {}
    mhz = [s.sm_mhz for s in samples if s.sm_mhz is not None]
    watts = [s.power_w for s in samples if s.power_w is not None]
    if mhz:
        out["sm_clock_mhz_min"], out["sm_clock_mhz_max"] = min(mhz), max(mhz)
    if watts:
        out["power_w_max"] = max(watts)
    return out
