"""What an FSDP2 rank does on its CPU at N >= 2 that its N = 1 step does not, timed in the N = 2
ranks before their training (`probe_job`, called when the job's optimizer is built after a
`fully_shard`, in every rank, the ranks running it at once as they run their steps).

- FSDP2's work around each collective (torch's `_fsdp_collectives`): before an all-gather,
  each parameter's shard cast to the policy's `param_dtype` and copied into one flat input
  (`foreach_all_gather`'s `_foreach_copy_`); after it, the gathered rows split into each
  parameter's unsharded tensor (`foreach_all_gather_copy_out`'s `split_with_sizes_copy`);
  before a reduce-scatter, the unsharded gradients chunked into one input
  (`foreach_reduce`'s `_chunk_cat`) and divided by the pre-divide factor (gloo has no
  average), after it the output divided again and cast back to the parameters' dtype. At
  N = 1 FSDP2 gathers nothing and skips them. An all-gather is timed as the job runs it,
  the unit's own `FSDPModule.unshard` and `reshard`, in the main thread's CPU seconds less
  those of a bare all-gather of the same bytes (the microbenchmark's fit times that part); a
  reduce-scatter's copies, which FSDP2 runs only inside the backward, on plain tensors at the
  job's recorded unit sizes (`fsdp_units.json`: every parameter's rows and elements) and
  dtypes.
- The job's optimizer (its class and hyperparameters) stepped over tensors of every
  parameter's full size and of its shard's size, each of the kind the job's own parameters
  are (FSDP2's DTensors on the job's mesh, whose every op dispatches through the tensor
  subclass): per-tensor work (the interpreter, the dispatch, the kernels' launches) does not
  halve with the elements, so a shard's step is more than the elements' share of N = 1's.
  `OptimizerProbe.share` carries the two to any N as per-tensor + per-element (the same
  tensors at both sizes, so two sizes fix both terms).

- How much one all-gather running behind the computation (prefetched, asynchronous, as the
  job runs it on the CPU) slows that computation: gloo's threads and the sockets take cores
  the ranks compute on (`_under_compute_cost`, behind the co-location probe's generic work).

Rank 0 writes the record (`PROBE_FILE`) into the run folder; `scale/runner.py`'s `fsdp_at`
hands it to `project_fsdp`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Final

from pydantic import Field

from torchdoctor.core.records import Record, SubRecord
from torchdoctor.core.shard_memory import ModelShape, ShardUnit

PROBE_FILE: Final = "fsdp_probe.json"
#: Timed repeats per probe (their median is kept) and untimed calls before them (the first
#: call allocates: the optimizer's state, the allocator's first blocks).
PROBE_REPEATS: Final = 7
PROBE_WARMUP: Final = 2
Work = Callable[[], object]
#: The probe's update size where the optimizer's own step cannot run unhooked.
PROBE_LR = 1e-3


def unhooked_step(optimizer: Any) -> Callable[[], object] | None:
    """`optimizer.step` without torch.optim's step hooks (the instrumentation's step
    boundaries), or None where this torch does not wrap it as expected.

    torch.optim wraps each optimizer class's `step` once in `Optimizer.profile_hook_step`
    (marked `hooked`, made with functools.wraps), which runs the global and per-optimizer step
    hooks around the class's own step; `__wrapped__` is that step, one level down."""
    step = type(optimizer).step
    raw = getattr(step, "__wrapped__", None)
    if not getattr(step, "hooked", False) or raw is None:
        return None
    return lambda: raw(optimizer)


class OptimizerProbe(SubRecord):
    """The job's optimizer step over every parameter at its full size and at its shard's at
    `world_size` (seconds, medians), and the elements of each."""

    optimizer: str
    tensors: int
    world_size: int
    full_elements: int
    shard_elements: int
    full_s: float
    shard_s: float

    def share(self, elements: int) -> float:
        """The step over `elements` (the same tensors) as a share of the full step: a
        per-tensor part and a per-element part, fixed by the two timed sizes."""
        if self.full_s <= 0:
            return 1.0
        per_element = (self.full_s - self.shard_s) / max(
            1, self.full_elements - self.shard_elements
        )
        per_element = max(0.0, per_element)
        fixed = max(0.0, self.full_s - per_element * self.full_elements)
        return (fixed + per_element * elements) / self.full_s


class FsdpProbe(Record):
    """FSDP2's CPU work at `world_size` beyond N = 1's, timed in the ranks (module)."""

    schema_name: ClassVar[str] = "fsdp_probe"

    world_size: int
    #: FSDP2's work around one all-gather and one reduce-scatter of each unit (seconds, by
    #: the unit's name in the shape); `fsdp.project_fsdp` counts them as the step runs them.
    gather_s: dict[str, float]
    reduce_s: dict[str, float]
    #: What one all-gather of each unit adds to the rank's computation when it runs behind it
    #: (prefetched and asynchronous, as the job runs it), beyond `gather_s`: gloo's threads
    #: and the socket work competing with the computation for the cores (seconds, by unit;
    #: empty where the job's units were not at hand).
    under_compute_s: dict[str, float] = Field(default_factory=dict)
    #: Whether the all-gathers were the job's own (`FSDPModule.unshard`, main-thread CPU less a
    #: bare all-gather's) or their copies on plain tensors (`gather_copies`).
    gathers_as_run: bool = False
    optimizer: OptimizerProbe | None = None

    def work_s(self, unit: str, kind: str) -> float:
        """FSDP2's work around one collective of `kind` of `unit` (0 for a unit not timed)."""
        return (self.gather_s if kind == "all_gather" else self.reduce_s).get(unit, 0.0)


def _median(work: Work, clock: Callable[[], float] = time.perf_counter) -> float:
    """The median of `work`'s times on `clock` over `PROBE_REPEATS` calls, after warm-ups."""
    for _ in range(PROBE_WARMUP):
        work()
    times = []
    for _ in range(PROBE_REPEATS):
        start = clock()
        work()
        times.append(clock() - start)
    return statistics.median(times)


def _row_numel(rows: int, numel: int) -> int:
    return numel // max(1, rows)


def gather_copies(unit: ShardUnit, world_size: int, dtype: Any, gathered: Any) -> Work:
    """FSDP2's copy-in and copy-out around one all-gather of `unit` (module)."""
    import torch

    rows = [-(-p.rows // world_size) for p in unit.parameters]
    widths = [_row_numel(p.rows, p.numel) for p in unit.parameters]
    shards = [torch.randn(r * w, dtype=dtype) for r, w in zip(rows, widths, strict=True)]
    sizes = [s.numel() for s in shards]
    flat_in = torch.empty(sum(sizes), dtype=gathered)
    flat_out = torch.empty(sum(sizes) * world_size, dtype=gathered)
    outs = [torch.empty(world_size * n, dtype=gathered) for n in sizes]

    def work() -> None:
        torch._foreach_copy_(list(torch.split(flat_in, sizes)), shards)
        torch.split_with_sizes_copy(
            flat_out.view(world_size, -1), sizes, dim=1, out=[o.view(world_size, -1) for o in outs]
        )

    return work


def reduce_copies(unit: ShardUnit, world_size: int, dtype: Any, reduced: Any) -> Work:
    """FSDP2's copies around one reduce-scatter of `unit`'s gradients (module)."""
    import torch

    rows = [-(-p.rows // world_size) * world_size for p in unit.parameters]
    widths = [_row_numel(p.rows, p.numel) for p in unit.parameters]
    grads = [torch.randn(r, w, dtype=reduced) for r, w in zip(rows, widths, strict=True)]
    total = sum(g.numel() for g in grads)
    flat = torch.empty(total, dtype=reduced)
    out = torch.empty(total // world_size, dtype=reduced)

    def work() -> None:
        torch._chunk_cat(grads, dim=0, num_chunks=world_size, out=flat.view(world_size, -1))
        flat.div_(world_size)  # gloo has no average: FSDP2 divides before and after
        out.copy_(flat[: out.numel()])  # the reduce-scatter's output (the collective untimed)
        out.div_(1.0)
        out.to(dtype)

    return work


UnitCost = Callable[[ShardUnit], float]


def _dtypes(shape: ModelShape, param_dtype_bytes: int, reduce_dtype_bytes: int) -> tuple[Any, ...]:
    import torch

    by_size = {1: torch.uint8, 2: torch.bfloat16, 4: torch.float32, 8: torch.float64}
    own = by_size.get(shape.parameter_bytes, torch.float32)
    gathered = by_size.get(param_dtype_bytes, own)
    return own, gathered, by_size.get(reduce_dtype_bytes, gathered)


def unit_work(
    shape: ModelShape,
    world_size: int,
    *,
    param_dtype_bytes: int,
    reduce_dtype_bytes: int,
    gather_cost: UnitCost | None = None,
    reduce_cost: UnitCost | None = None,
) -> tuple[dict[str, float], dict[str, float]]:
    """Seconds of FSDP2's work around one all-gather and one reduce-scatter of each unit, by
    the unit's name: `gather_cost` (else the copies on plain tensors, `gather_copies`) and
    `reduce_cost` (else `reduce_copies`); never below 0 (a difference of two timings)."""
    own, gathered, reduced = _dtypes(shape, param_dtype_bytes, reduce_dtype_bytes)

    def copies_of(make: Callable[..., Work], dtype: Any) -> UnitCost:
        return lambda unit: _median(make(unit, world_size, own, dtype))

    gather = gather_cost or copies_of(gather_copies, gathered)
    reduce = reduce_cost or copies_of(reduce_copies, reduced)
    return (
        {u.name: max(0.0, gather(u)) for u in shape.units},
        {u.name: max(0.0, reduce(u)) for u in shape.units},
    )


def _hyperparameters(optimizer: Any) -> dict[str, Any]:
    """The optimizer's defaults its constructor takes (AdamW keeps one it does not)."""
    import inspect

    accepted = inspect.signature(type(optimizer).__init__).parameters
    return {k: v for k, v in optimizer.defaults.items() if k in accepted}


def _step_over(optimizer: Any, params: list[Any]) -> float:
    """The median step of `optimizer`'s class and hyperparameters over `params` (each given a
    gradient), stepped without torch.optim's step hooks (the rank's instrumentation marks a
    step there)."""
    import torch

    grads = [torch.full_like(p, 0.01) for p in params]
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    probe = type(optimizer)(params, **_hyperparameters(optimizer))
    step = unhooked_step(probe)
    if step is None:

        def step() -> None:
            with torch.no_grad():
                torch._foreach_add_(params, grads, alpha=-PROBE_LR)

    return _median(step)


def _like(numels: list[int], like: list[Any] | None) -> list[Any]:
    """Parameters of `numels` elements, each of its kind in `like` (the job's own: a DTensor
    on the same mesh and placements, whose every op dispatches through the tensor subclass)
    where given, else plain tensors."""
    import torch

    out = []
    for k, n in enumerate(numels):
        local = torch.zeros(n)
        model = like[k] if like is not None and k < len(like) else None
        mesh = getattr(model, "device_mesh", None)
        if model is not None and mesh is not None:
            from torch.distributed.tensor import DTensor

            local = DTensor.from_local(local, mesh, model.placements, run_check=False)
        out.append(torch.nn.Parameter(local))
    return out


def probe_optimizer(
    optimizer: Any, shape: ModelShape, world_size: int, like: list[Any] | None = None
) -> OptimizerProbe:
    """The job's optimizer over every parameter at its full size and at its shard's, each
    parameter of the kind the job's own is (`like`, in the shape's order; plain without)."""
    full = [p.numel for u in shape.units for p in u.parameters]
    shard = [
        -(-p.rows // world_size) * _row_numel(p.rows, p.numel)
        for u in shape.units
        for p in u.parameters
    ]
    return OptimizerProbe(
        optimizer=type(optimizer).__name__,
        tensors=len(full),
        world_size=world_size,
        full_elements=sum(full),
        shard_elements=sum(shard),
        full_s=_step_over(optimizer, _like(full, like)),
        shard_s=_step_over(optimizer, _like(shard, like)),
    )


def _unshard_cost(modules: dict[str, Any], dtype: Any) -> UnitCost:
    """A unit's all-gather as the job runs it (`FSDPModule.unshard` then `reshard`), in the
    main thread's CPU seconds, less those of a bare all-gather of the same bytes (what the
    microbenchmark's fit already times): FSDP2's own work around the collective."""
    import torch
    import torch.distributed as dist

    def cost(unit: ShardUnit) -> float:
        module = modules[unit.name]

        def gather() -> None:
            module.unshard()
            module.reshard()

        world = dist.get_world_size()
        mine = torch.zeros(unit.shard_numel(world), dtype=dtype)
        out = torch.empty(mine.numel() * world, dtype=dtype)
        fsdp = _median(gather, time.thread_time)
        bare = _median(lambda: dist.all_gather_into_tensor(out, mine), time.thread_time)
        return fsdp - bare

    return cost


#: A computation block behind an all-gather lasts this many times the all-gather alone, so the
#: gather ends inside it and what is timed is the interference, not a wait for the gather.
COVER: Final = 3.0
#: The most calls of the work in one block (a gather long beside the work).
MAX_CALLS: Final = 200


def _under_compute_cost(modules: dict[str, Any], work: Work, own: dict[str, float]) -> UnitCost:
    """A unit's all-gather issued asynchronously (`FSDPModule.unshard(async_op=True)`) and
    waited for after a block of `work` (the job's prefetch on the CPU): the block's time with
    the gather behind it less without, less FSDP2's own work (`own`). Every rank runs the
    same number of calls (the largest any rank needs)."""
    import math

    import torch
    import torch.distributed as dist

    def cost(unit: ShardUnit) -> float:
        module = modules[unit.name]

        def gather() -> None:
            module.unshard()
            module.reshard()

        one = _median(work)
        need = min(MAX_CALLS, max(1, math.ceil(COVER * _median(gather) / max(one, 1e-9))))
        calls = torch.tensor([need])
        dist.all_reduce(calls, op=dist.ReduceOp.MAX)

        def alone() -> None:
            for _ in range(int(calls[0])):
                work()

        def behind() -> None:
            handle = module.unshard(async_op=True)
            alone()
            if handle is not None:
                handle.wait()
            module.reshard()

        return _median(behind) - _median(alone) - own.get(unit.name, 0.0)

    return cost


def probe_job(job: Any, optimizer: Any, modules: dict[str, Any], out: Path | None) -> None:
    """Time the probes in this rank (every rank at once, after a barrier in the job's group)
    and write the record from rank 0 (`out`: the run folder; None on the other ranks).
    `modules`: the job's `fully_shard` units by their names in the shape."""
    import torch.distributed as dist

    world = dist.get_world_size() if dist.is_initialized() else 1
    if world < 2:
        return
    dist.barrier()
    real = set(modules) == {u.name for u in job.shape.units}
    _, gathered, _ = _dtypes(job.shape, job.param_dtype_bytes, job.reduce_dtype_bytes)
    gathers, reduces = unit_work(
        job.shape,
        world,
        param_dtype_bytes=job.param_dtype_bytes,
        reduce_dtype_bytes=job.reduce_dtype_bytes,
        gather_cost=_unshard_cost(modules, gathered) if real else None,
    )
    under: dict[str, float] = {}
    if real:
        from torchdoctor.scale._rank_bench import generic_work

        cost = _under_compute_cost(modules, generic_work(), gathers)
        under = {u.name: max(0.0, cost(u)) for u in job.shape.units}
    dist.barrier()
    try:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        # the job's parameters stand for the shape's one to one (the same modules' order)
        like = params if len(params) == job.shape.parameter_count else None
        opt: OptimizerProbe | None = probe_optimizer(optimizer, job.shape, world, like)
    except (TypeError, ValueError, RuntimeError):  # an optimizer not built from its defaults
        opt = None
    dist.barrier()
    if out is not None:
        FsdpProbe(
            world_size=world,
            gather_s=gathers,
            reduce_s=reduces,
            under_compute_s=under,
            gathers_as_run=real,
            optimizer=opt,
        ).write(out / PROBE_FILE)


def read_fsdp_probe(run_dir: Path) -> FsdpProbe | None:
    path = run_dir / PROBE_FILE
    return FsdpProbe.read(path) if path.is_file() else None
