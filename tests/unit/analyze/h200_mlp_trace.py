"""A trace modelled on the built-in mlp's diagnosis on an NVIDIA H200 (torch 2.11, CUDA 13).

That run recorded (its analysis.json, kept in tests/data/h200/diag_mlp_analysis.json): 5
profiled steps of ~7.7 ms; per step two pageable host-to-device copies (the batch and its
labels, each a cudaMemcpyAsync and a cudaStreamSynchronize: the job's real syncs), and
AdamW's foreach step reading its CPU step counters with `.item()` twice per parameter (8
parameters: 16 `aten::item` -> `aten::_local_scalar_dense` per step, 80 in all, with no
runtime call beneath them: a host tensor's read waits for no device). After the window, the
engine's end-of-chunk device sync and the chunk's loss read (a real device read: its
cudaMemcpyAsync and cudaStreamSynchronize lie beneath it, as in the H100 traces in
tests/data/traces) and a CUDA event's wait.

`tool_ranges=True` puts the engine's own syncs inside torchdoctor's TOOL_SYNC_RANGE, as the
engine now records them; `event_clock_in_steps=True` adds what a script diagnosis recorded
under the collector's event clock before it stopped waiting inside the steps: a
cudaEventSynchronize inside every step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trace_events import op_event, write_trace

from torchdoctor.core.tool_syncs import TOOL_SYNC_RANGE

DEVICE = "NVIDIA H200"
STEPS = 5
STEP_US = 7_700.0
PARAMS = 8  # mlp: three hidden Linear layers and the output one, weight and bias each
COUNTER_READS_PER_STEP = 2 * PARAMS  # AdamW's foreach step: bias corrections 1 and 2
COPIES_PER_STEP = 2
HOST_TID = 11
STREAM = 7


class _Trace:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.corr = 0

    def host(self, name: str, ts: float, dur: float, cat: str = "cpu_op") -> None:
        self.events.append(op_event(name, ts, dur, cat=cat, tid=HOST_TID))

    def runtime(self, name: str, ts: float, dur: float, device: tuple[str, float, float] | None):
        self.corr += 1
        self.events.append(
            op_event(name, ts, dur, cat="cuda_runtime", tid=HOST_TID, correlation=self.corr)
        )
        if device is not None:
            cat, dev_ts, dev_dur = device
            name_ = "Memcpy HtoD (Pageable -> Device)" if cat == "h2d" else (
                "Memcpy DtoH (Device -> Pageable)" if cat == "d2h" else "sm80_sgemm_kernel"
            )  # fmt: skip
            ev = op_event(name_, dev_ts, dev_dur, cat="kernel" if cat == "kernel" else
                          "gpu_memcpy", tid=STREAM, correlation=self.corr, device=0,
                          stream=STREAM)  # fmt: skip
            ev["pid"] = 0
            if cat != "kernel":
                ev["args"]["bytes"] = 33792
            self.events.append(ev)

    def device_scalar_read(self, t: float) -> float:
        self.host("aten::item", t, 40.0)
        self.host("aten::_local_scalar_dense", t + 2.0, 36.0)
        self.runtime("cudaMemcpyAsync", t + 4.0, 10.0, ("d2h", t + 10.0, 2.0))
        self.runtime("cudaStreamSynchronize", t + 16.0, 20.0, None)
        return t + 45.0


def write_h200_mlp_trace(
    path: Path, *, tool_ranges: bool = True, event_clock_in_steps: bool = False
) -> Path:
    tr = _Trace()
    t0 = 1_000.0
    for step in range(STEPS):
        s = t0 + step * STEP_US
        tr.host(f"ProfilerStep#{step}", s, STEP_US - 10.0, cat="user_annotation")
        t = s + 20.0
        for _ in range(COPIES_PER_STEP):  # x.to(dev), y.to(dev) from pageable memory
            tr.host("aten::copy_", t, 60.0)
            tr.runtime("cudaMemcpyAsync", t + 5.0, 15.0, ("h2d", t + 12.0, 3.0))
            tr.runtime("cudaStreamSynchronize", t + 22.0, 30.0, None)
            t += 80.0
        for _ in range(20):  # forward and backward GEMMs
            tr.host("aten::mm", t, 60.0)
            tr.runtime("cudaLaunchKernel", t + 10.0, 8.0, ("kernel", t + 25.0, 20.0))
            t += 70.0
        tr.host("Optimizer.step#AdamW.step", t, 2_000.0, cat="user_annotation")
        t += 10.0
        for _ in range(COUNTER_READS_PER_STEP):  # _get_value(step): a CPU tensor's .item()
            tr.host("aten::item", t, 2.0)
            tr.host("aten::_local_scalar_dense", t + 0.5, 1.0)
            t += 5.0
        tr.host("aten::_foreach_add_", t, 40.0)
        tr.runtime("cudaLaunchKernel", t + 5.0, 8.0, ("kernel", t + 20.0, 30.0))
        if event_clock_in_steps and step > 0:
            # The collector's clock waiting for the previous step's end event, in this step.
            tr.runtime("cudaEventSynchronize", t + 100.0, 15.0, None)
    t = t0 + STEPS * STEP_US + 50.0
    if tool_ranges:
        tr.host(TOOL_SYNC_RANGE, t, 40.0, cat="user_annotation")
    tr.runtime("cudaDeviceSynchronize", t + 5.0, 30.0, None)  # the engine's end of chunk
    t = tr.device_scalar_read(t + 60.0)  # the chunk's losses read once
    tr.runtime("cudaEventSynchronize", t, 10.0, None)
    return write_trace(path, tr.events, device=DEVICE)
