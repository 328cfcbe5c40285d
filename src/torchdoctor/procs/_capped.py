"""One training step under a real memory cap, in a child process of its own (Linux, CPU).

On the CPU no allocator refuses memory by itself, so the child makes the kernel refuse it:

- `RLIMIT_DATA` (setrlimit(2)): since Linux 4.7 it bounds the process's data size, every
  private writable mapping (the brk heap and anonymous `mmap`s) as /proc/self/status counts
  it in `VmData`. An `mmap`, `brk` or `mprotect` that would take the data size past the limit
  fails with ENOMEM, so glibc's malloc returns NULL and PyTorch's CPU allocator raises its
  "DefaultCPUAllocator: can't allocate memory" error: a real out-of-memory error, at the
  allocation that crosses the cap.
- glibc's mmap threshold fixed (mallopt(3), `M_MMAP_THRESHOLD`): setting it disables the
  dynamic threshold, which otherwise climbs to 32 MiB as mapped blocks are freed, after which
  tensors below it come from the heap and stay there when freed. Fixed, every block of the
  threshold or more is mapped when allocated and unmapped when freed, so the data size follows
  the live tensors instead of the heap's high-water mark.

The child prepares the session at the batch size and runs one warm-up step uncapped (it creates
the optimizer's state, and the libraries' lazy buffers and threads: OpenMP's workers and their
stacks, glibc's thread arenas, the BLAS and oneDNN caches), then reads its data size and the
tensors the memory prediction counts as resident (parameters, buffers, optimizer state, the
gradients still held). The cap is that data size less those tensors plus the budget, so the
budget the cap enforces is the one the prediction reads: the step's tensors, resident ones
included, above the process as it stands between steps. What the step allocates beyond its
tensors (autograd's graph, kernels' scratch buffers, page rounding, heap fragmentation) takes
from the same budget, as it would on a device. Then one steady step runs under the cap: it
fits, or it fails with an out-of-memory error (`FailureKind.OOM`).

Each probe is a process forked from a forkserver that has imported torch once, so a probe costs
the session's build and two steps, not an interpreter's start.
"""

from __future__ import annotations

import gc
import multiprocessing
import resource
from multiprocessing.connection import Connection
from typing import Any, Final

import torch

from torchdoctor.collect import unique_bytes
from torchdoctor.core.errors import UsageError
from torchdoctor.core.memory_owners import CappedStep
from torchdoctor.engine import prepare
from torchdoctor.knobs import Recipe
from torchdoctor.procs._datacap import (
    cap_data_size,
    check_supported,
    data_size_bytes,
    fix_mmap_threshold,
)
from torchdoctor.procs._failure import FailureKind, classify_exception
from torchdoctor.workloads import get_workload

#: Steps before the capped one: the first creates the optimizer's state (as the prediction's
#: measurement, `collect.memory_owners.WARMUP_STEPS`).
WARMUP_STEPS: Final = 1
#: A probe that has not answered in this long is killed (a step of the benchmark's largest
#: batches takes seconds; a hang is not an edge).
PROBE_TIMEOUT_S: Final = 600.0
#: Modules the forkserver imports once for every probe forked from it: this one (torch, the
#: engine, the workloads) and torch._dynamo, which building an optimizer imports (seconds).
_PRELOAD: Final = ["torch._dynamo", "torchdoctor.procs._capped"]

_CONTEXT: multiprocessing.context.ForkServerContext | None = None


def _context() -> multiprocessing.context.ForkServerContext:
    global _CONTEXT
    if _CONTEXT is None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        _CONTEXT = ctx
    return _CONTEXT


def run_capped_step(
    workload: str,
    batch: int,
    budget_bytes: int,
    *,
    params: dict[str, Any] | None = None,
    recipe: dict[str, Any] | None = None,
    seed: int = 0,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> CappedStep:
    """Run `workload` at `batch` in a child whose steady step is capped to `budget_bytes`."""
    check_supported()
    request = {
        "workload": workload,
        "params": dict(params or {}),
        "recipe": dict(recipe or {}),
        "batch": batch,
        "budget_bytes": budget_bytes,
        "seed": seed,
    }
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_child_entry, args=(send, request), name=f"capped-step-{batch}", daemon=True
    )
    proc.start()
    send.close()
    try:
        if not receive.poll(timeout_s):
            proc.kill()
            return CappedStep(
                batch=batch,
                budget_bytes=budget_bytes,
                outcome=FailureKind.TIMEOUT.value,
                reason=f"no answer in {timeout_s:.0f} s",
            )
        try:
            answer: dict[str, Any] = receive.recv()
        except EOFError:
            proc.join(5)
            return CappedStep(
                batch=batch,
                budget_bytes=budget_bytes,
                outcome=FailureKind.CRASH.value,
                reason=f"the probe died without an answer (exit code {proc.exitcode}) under "
                "the cap: most likely an allocation refused where its failure goes unchecked",
            )
        return CappedStep.model_validate(answer)
    finally:
        receive.close()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join(5)


def _child_entry(conn: Connection, request: dict[str, Any]) -> None:
    try:
        result = capped_step(**request)
    except BaseException as exc:  # reported to the parent, which decides what it means
        text = str(exc).splitlines()[0] if str(exc) else ""
        result = CappedStep(
            batch=request["batch"],
            budget_bytes=request["budget_bytes"],
            outcome=classify_exception(exc).value,
            reason=f"{type(exc).__name__}: {text}",
        )
    conn.send(result.model_dump())
    conn.close()


def capped_step(
    *,
    workload: str,
    params: dict[str, Any],
    recipe: dict[str, Any],
    batch: int,
    budget_bytes: int,
    seed: int,
) -> CappedStep:
    """In the child: build, warm up uncapped, cap the data size, run one steady step."""
    fixed = fix_mmap_threshold()
    if not fixed:
        raise UsageError("cannot fix glibc's mmap threshold (mallopt): not a glibc system")
    job = get_workload(workload, **params)
    session = prepare(
        job, Recipe.from_dict(recipe).with_changes(batch_size=batch), device="cpu", seed=seed
    )
    try:
        samples = len(session.dataset) if hasattr(session.dataset, "__len__") else None
        if samples is not None and samples < batch:
            raise UsageError(
                f"batch size {batch} is larger than {job.name}'s dataset ({samples} samples)"
            )
        gc.collect()
        before = data_size_bytes()
        session.run_steps(WARMUP_STEPS, measure_phases=False)
        gc.collect()
        model, optimizer = session.raw_model, session.optimizer
        state = [
            value
            for per_param in optimizer.state.values()
            for value in per_param.values()
            if isinstance(value, torch.Tensor)
        ]
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        resident = unique_bytes([*model.parameters(), *model.buffers(), *state, *grads])
        base = data_size_bytes()
        if base is None:
            raise UsageError("cannot read the data size (/proc/self/status VmData)")
        limit = base - resident + budget_bytes
        old = cap_data_size(limit)
        outcome, reason = "fits", ""
        try:
            session.run_steps(1, measure_phases=False)
        except Exception as exc:  # the step's own failure under the cap: what the probe asks
            outcome = classify_exception(exc).value
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        finally:
            resource.setrlimit(resource.RLIMIT_DATA, old)
        return CappedStep(
            batch=batch,
            budget_bytes=budget_bytes,
            outcome=outcome,
            reason=reason,
            data_before_bytes=before,
            data_base_bytes=base,
            resident_bytes=resident,
            limit_bytes=limit,
        )
    finally:
        session.close()
