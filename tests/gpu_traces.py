"""Synthetic Kineto traces of a GPU training job, in the 2021 schema and in today's.

The job they model is a real case from the field: an fp32 ResNet-style network trained on a
V100 (compute capability 7.0) with a DataLoader of 0 workers that takes about a third of
every step, a pageable host-to-device copy per batch, and two `.item()` reads per step whose
syncs take well under 1% of the step. Both schemas describe the same timeline:

- "old" (torch 1.8-1.9 era): categories `Operator`, `Runtime`, `Kernel`, `Memcpy`, `Memset`;
  `ProfilerStep#N` and the DataLoader span are `Operator` events; device events carry the
  lower-case "external id"; tids on the device are "stream 7" strings; optionally no
  `deviceProperties` at all (the GPU must then be inferred from kernel names);
- "new": `cpu_op`, `user_annotation`, `cuda_runtime`, `kernel`, `gpu_memcpy`, `gpu_memset`,
  "External id" everywhere, "Concrete Inputs" on operators, and `deviceProperties`.

Timeline of one step (STEP_US long): the DataLoader's `__next__` (DATA_US), a pageable HtoD
copy, then forward/backward/optimizer operators whose kernels run right behind their launches
(the host is barely ahead of the device), two scalar reads whose stream syncs block the host
for SYNC_US each, and the Python rest of the step.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STEP_US = 100_000.0
DATA_US = 33_000.0  # a third of the step: the 0-worker DataLoader
COPY_US = 300.0
SYNC_US = 250.0  # host blocked in each cudaStreamSynchronize (2 per step: 0.5% of the step)
STEPS = 3
HOST_PID = 4242
DEVICE_NAME = "Tesla V100-SXM2-16GB"

# (op name, Input Dims, kernel name, kernel us): one ResNet-style block's worth of work per
# entry; repeated to fill the step. fp32 everywhere; the convolutions and the GEMM are the
# tensor-core-eligible work, on CUDA cores here (the kernels of an fp32 job on Volta).
_X = [32, 256, 28, 28]
_W = [256, 256, 3, 3]
_FORWARD = [
    ("aten::cudnn_convolution", [_X, _W], "implicit_convolve_sgemm", 2400.0),
    ("aten::cudnn_convolution", [_X, _W], "volta_scudnn_128x64_relu_interior_nn_v1", 2200.0),
    ("aten::native_batch_norm", [_X, [256], [256]], "void at::native::batch_norm_collect_"
     "statistics_kernel<float, float, float>(float*)", 700.0),
    ("aten::relu_", [_X], "void at::native::vectorized_elementwise_kernel<4, at::native::"
     "clamp_min_scalar_kernel_impl(float)>", 300.0),
]  # fmt: skip
_BACKWARD = [
    ("aten::cudnn_convolution_backward", [_X, _X, _W],
     "void cudnn::detail::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int)", 2600.0),
    ("aten::cudnn_convolution_backward", [_X, _X, _W],
     "void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>(int)", 2300.0),
    ("aten::native_batch_norm_backward", [_X, _X, [256]], "void at::native::batch_norm_"
     "backward_kernel<float, float, float>(float*)", 900.0),
    ("aten::threshold_backward", [_X, _X], "void at::native::vectorized_elementwise_kernel<4,"
     " at::native::threshold_kernel_impl<float>(float)>", 300.0),
]  # fmt: skip
_FC = ("aten::addmm", [[1000], [32, 2048], [2048, 1000]], "volta_sgemm_128x64_nn", 900.0)
_OPTIM = (
    "aten::add_",
    [[256, 256, 3, 3], [256, 256, 3, 3]],
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(float)",
    150.0,
)
LAUNCH_GAP_US = 30.0  # host time between two kernel launches beyond the kernel's own time


class _Ids:
    def __init__(self) -> None:
        self.ext = 100
        self.corr = 1000

    def next(self) -> tuple[int, int]:
        self.ext += 1
        self.corr += 1
        return self.ext, self.corr


def _event(cat: str, name: str, ts: float, dur: float, *, pid: Any, tid: Any, **args: Any):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


class _Writer:
    """Emits events of one schema; the timeline is the same for both."""

    def __init__(self, schema: str) -> None:
        if schema not in ("old", "new"):
            raise ValueError(f"schema must be 'old' or 'new', not {schema!r}")
        self.old = schema == "old"
        self.events: list[dict[str, Any]] = []
        self.ids = _Ids()
        self.device_tid: Any = "stream 7" if self.old else 7

    def cat(self, new: str) -> str:
        old = {"cpu_op": "Operator", "user_annotation": "Operator", "cuda_runtime": "Runtime",
               "kernel": "Kernel", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset"}  # fmt: skip
        return old[new] if self.old else new

    def host(self, cat: str, name: str, ts: float, dur: float, **args: Any) -> None:
        self.events.append(_event(self.cat(cat), name, ts, dur, pid=HOST_PID, tid=HOST_PID,
                                  **args))  # fmt: skip

    def op(self, name: str, ts: float, dur: float, dims: list[Any] | None = None) -> int:
        ext, _ = self.ids.next()
        args: dict[str, Any] = {"External id": ext}
        if dims is not None:
            args["Input Dims"] = dims
            args["Input type"] = ["float" if d else "" for d in dims]
            if not self.old and "convolution" in name:
                args["Concrete Inputs"] = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]"]
        self.host("cpu_op", name, ts, dur, **args)
        return ext

    def device(self, cat: str, name: str, launch: str, ext: int, at: float, ts: float,
               dur: float, **extra: Any) -> None:  # fmt: skip
        _, corr = self.ids.next()
        ext_key = "external id" if self.old else "External id"
        self.host("cuda_runtime", launch, at, 8.0, correlation=corr, **{ext_key: ext})
        args = {"correlation": corr, ext_key: ext, "device": 0, "stream": 7, **extra}
        self.events.append(_event(self.cat(cat), name, ts, dur, pid=0, tid=self.device_tid,
                                  **args))  # fmt: skip


def _step_ops() -> Iterator[tuple[str, list[Any], str, float]]:
    for _ in range(5):
        yield from _FORWARD
    yield _FC
    yield (_FC[0], _FC[1], _FC[2], _FC[3])  # its backward GEMMs
    for _ in range(5):
        yield from _BACKWARD
    for _ in range(8):
        yield _OPTIM


def v100_events(schema: str) -> list[dict[str, Any]]:
    """The events of STEPS profiled steps of the V100 job in `schema` ("old" or "new")."""
    w = _Writer(schema)
    for step in range(STEPS):
        s = 1_000_000.0 + step * STEP_US
        w.host("user_annotation", f"ProfilerStep#{step + 1}", s, STEP_US - 1.0)
        w.host("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
               s + 1.0, DATA_US)  # fmt: skip
        t = s + DATA_US + 20.0
        ext = w.op("aten::copy_", t, COPY_US + 60.0, [[32, 3, 224, 224], [32, 3, 224, 224]])
        w.device("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", "cudaMemcpyAsync", ext,
                 t + 10.0, t + 30.0, COPY_US, bytes=32 * 3 * 224 * 224 * 4)  # fmt: skip
        t += COPY_US + 80.0
        device_free = t
        for name, dims, kernel, kernel_us in _step_ops():
            ext = w.op(name, t, kernel_us + LAUNCH_GAP_US - 5.0, dims)
            start = max(t + 20.0, device_free)
            w.device("kernel", kernel, "cudaLaunchKernel", ext, t + 5.0, start, kernel_us)
            device_free = start + kernel_us
            t += kernel_us + LAUNCH_GAP_US
        for _ in range(2):  # loss.item() and correct.item()
            # .item(): aten::item -> aten::_local_scalar_dense -> DtoH copy + stream sync
            w.op("aten::item", t, SYNC_US + 60.0, [[]])
            ext = w.op("aten::_local_scalar_dense", t + 5.0, SYNC_US + 50.0, [[]])
            w.device("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", "cudaMemcpyAsync", ext,
                     t + 10.0, max(t + 20.0, device_free), 3.0, bytes=4)  # fmt: skip
            w.host("cuda_runtime", "cudaStreamSynchronize", t + 20.0, SYNC_US)
            t += SYNC_US + 80.0
        if t > s + STEP_US:
            raise AssertionError(f"step {step} overflows: {t - s:.0f} us")
    return w.events


def write_v100_trace(path: Path, schema: str, *, device_properties: bool | None = None) -> Path:
    """Write the V100 job's trace (gzip when `path` ends in .gz). `device_properties`:
    include deviceProperties (default: only in the new schema, as 2021 traces lacked it)."""
    doc: dict[str, Any] = {"schemaVersion": 1, "traceEvents": v100_events(schema)}
    if device_properties if device_properties is not None else schema == "new":
        doc["deviceProperties"] = [
            {"id": 0, "name": DEVICE_NAME, "totalGlobalMem": 16945512448, "computeMajor": 7,
             "computeMinor": 0, "maxThreadsPerBlock": 1024, "warpSize": 32,
             "numSms": 80, "sharedMemPerBlock": 49152, "regsPerBlock": 65536}
        ]  # fmt: skip
    text = json.dumps(doc)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path
