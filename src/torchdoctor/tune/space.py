"""What the ladder tries: knobs, their candidate values, and the order to try them in.

Knobs the diagnosis prescribes come first, largest Amdahl bound on gain first, except those
whose bound cannot clear the ladder's keep bar, which wait for the static prior's knobs
(`order_knobs`); the rest follow the static prior (below).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from torchdoctor.core.vocabulary import Safety

if TYPE_CHECKING:
    from torchdoctor.knobs import Ladder


def _ranked(rank: Callable[[Ladder], int | None]) -> tuple[str, ...]:
    """Knob names the catalogue ranks under `rank`, best rank first."""
    from torchdoctor.knobs import catalogue

    ranked = [(rank(k.ladder), k.name) for k in catalogue() if k.ladder is not None]
    return tuple(name for r, name in sorted((r, n) for r, n in ranked if r is not None))


def batch_knobs() -> frozenset[str]:
    """Knobs the ladder does not flip one at a time: the batch-size search owns them."""
    from torchdoctor.knobs import catalogue

    return frozenset(k.name for k in catalogue() if k.ladder is not None and k.ladder.batch_search)


def gpu_prior() -> tuple[str, ...]:
    """The general prior: knobs in the order of their typical gain on small training jobs
    (each knob's `Ladder.gpu`).

    torch.compile's fusion is the largest general win (PyTorch 2 paper, Ansel et al. 2024:
    1.3-2x geomean in training); reduced precision is next on accelerators (and is measured,
    not assumed, on CPU, where bf16 is often slower); memory format and thread count matter
    for convolutions and CPU runs; the data-loading and allocator knobs are usually a few
    percent unless the diagnosis finds a data-wait bound; checkpointing trades speed for
    memory and comes last.
    """
    return _ranked(lambda ladder: ladder.gpu)


def cpu_prior() -> tuple[str, ...]:
    """The prior on a CPU (each knob's `Ladder.cpu`): compile first (inductor's fused C++
    kernels are the largest win for small conv nets and MLPs on CPU; measured here: cnn
    1.25-1.3x, mlp 1.8x with one thread), then the thread count (on a shared or small host,
    OpenMP's spinning barriers with a thread per core can cost 2-40x when another process
    holds a core: mlp with compile went from 327 to 24,416 samples/s with threads=1), then the
    loader workers (they need a free core, so they come after threads), then memory format and
    the optimizer's implementation. Reduced precision comes late where the CPU has no bf16
    units (emulated bf16 is slower than fp32), second where it has them (`static_prior`).
    """
    return _ranked(lambda ladder: ladder.cpu)


#: The built-in catalogue's batch knobs and priors (`batch_knobs()`, `gpu_prior()`,
#: `cpu_prior()` read the live catalogue).
BATCH_KNOBS: Final = batch_knobs()
STATIC_PRIOR: Final[tuple[str, ...]] = gpu_prior()
CPU_PRIOR: Final[tuple[str, ...]] = cpu_prior()

#: At most this many values per integer knob (threads, num_workers, ...): the domain's ends
#: and the powers of two between them; a ladder does not sweep integers one by one.
MAX_INT_CANDIDATES: Final = 4


@dataclass(frozen=True)
class KnobSpec:
    """A knob as the tuner sees it: candidate values and safety class.

    `paired`: settings that go with each of its values but the default, in the same trial
    (loader workers with `persistent_workers`: a worker count measured with workers forked
    anew each epoch charges it their start-up).
    """

    name: str
    values: tuple[Any, ...]
    safety: Safety
    default: Any = None
    paired: tuple[tuple[str, Any], ...] = ()

    def change(self, value: Any) -> dict[str, Any]:
        """The ladder's change for `value`: it, and its paired settings unless it is off."""
        if not value or value == self.default:
            return {self.name: value}
        return {self.name: value, **dict(self.paired)}


#: bucket_cap_mb's candidates around DDP's 25 MB, larger first: fewer all-reduce calls win
#: where each call's fixed cost dominates (gloo, small models, the common case of a job that
#: fits one host), smaller ones start the first all-reduce earlier in backward (DDP paper,
#: Li et al. VLDB 2020, section 5.3: the best size depends on model and network).
BUCKET_CANDIDATES_MB: Final = (100, 5)

#: torch.compile modes that only differ from "default" through CUDA graphs: on a CPU they
#: compile the same code, so trying them would spend a compile-sized trial on a duplicate.
CUDA_ONLY_COMPILE_MODES: Final = frozenset({"reduce-overhead"})


def static_prior(device: str, *, native_bf16: bool = False) -> tuple[str, ...]:
    """The knob order for `device` (the CPU prior first on a CPU, then the general one).

    `native_bf16`: the CPU has bf16 matrix units (`core.env.cpu_computes_bf16`), where bf16
    autocast is the second-largest win after compile, so precision comes right after it: on
    the AVX512-BF16 host here bf16 ran the cnn workload 2.2x, a 1024-wide MLP 1.5x and a
    384-wide nanoGPT 1.3-1.7x faster than fp32 (AMX: bf16 matmuls 4x fp32), and last in the
    order a budget ran out before it (nanoGPT: 7 trials in 540 s, none of them precision).
    """
    from torchdoctor.knobs import PRECISION

    general = gpu_prior()
    if device.startswith("cuda"):
        return general
    cpu = cpu_prior()
    if native_bf16 and PRECISION.name in cpu:
        cpu = (cpu[0], PRECISION.name, *(n for n in cpu[1:] if n != PRECISION.name))
    return (*cpu, *(n for n in general if n not in cpu))


#: A prescribed knob whose Amdahl bound is at most this is tried after the prior's knobs: even
#: removing all the time its finding names cannot clear the ladder's keep bar of 1 + min_gain
#: (`tune.settings.DEFAULT_MIN_GAIN`, 2%), while a knob of unknown gain still might.
MIN_WORTHWHILE_BOUND: Final = 1.02


def order_knobs(
    specs: Sequence[KnobSpec],
    prescribed: Sequence[str] = (),
    prior: Sequence[str] = STATIC_PRIOR,
    bounds: Mapping[str, float] | None = None,
) -> list[KnobSpec]:
    """Prescribed knobs first, then the static prior, then the rest.

    With `bounds` (knob -> the diagnosis's Amdahl bound on its gain), the prescribed knobs go
    by expected gain per trial: the largest bound first (a trial costs about the same for
    each: `tune.cost`), and those whose bound cannot clear `MIN_WORTHWHILE_BOUND` after the
    prior's knobs (the H200's cnn diagnosis prescribed copies from pinned memory at most
    1.00x). A prescribed knob without a bound keeps its place in front.
    """
    by_name = {s.name: s for s in specs}
    named = [n for n in prescribed if n in by_name]
    bounds = bounds or {}
    unbound = [n for n in named if n not in bounds]
    worth = [n for n in named if bounds.get(n, 0.0) > MIN_WORTHWHILE_BOUND]
    worth.sort(key=lambda n: -bounds[n])  # stable: ties keep the prescribed order
    order: list[str] = [*unbound, *worth]
    order += [n for n in prior if n in by_name and n not in named]
    order += [n for n in named if n not in order]
    order += [s.name for s in specs if s.name not in order]
    return [by_name[n] for n in order]


def usable_cores() -> int:
    """Cores this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def worker_candidates(cores: int, upper: int) -> tuple[int, ...]:
    """Loader worker counts to try, most first: the usable cores (a worker needs a core, and
    past them workers only compete with the training loop, on any device: an H200 host of 16
    cores was tried with 32), half and a quarter of them, and none.

    Most first: a loader-bound step gains in proportion to the workers (one worker on 2 cores
    can hide at most the step's compute, 1.08x on the zoo's data-loading script, where two
    gave 1.6x), so the value most likely to win is tried while the budget lasts; fewer are
    still tried from it.
    """
    top = max(1, min(cores, upper))
    values = [top]
    while len(values) < MAX_INT_CANDIDATES - 1 and values[-1] > 1:
        values.append(values[-1] // 2)
    return (*values, 0)


def with_diagnosed(specs: Sequence[KnobSpec], diagnosed: dict[str, Any]) -> list[KnobSpec]:
    """`specs` with each value the diagnosis prescribed (`diagnosed`: knob -> value) among
    its knob's candidates, first when it was not one (the diagnosis's suggestion is its
    likeliest win); a worker count past the usable cores is not added."""
    from torchdoctor.knobs import NUM_WORKERS

    out = []
    for spec in specs:
        value = diagnosed.get(spec.name)
        fits = value is not None and not (
            spec.name == NUM_WORKERS.name and isinstance(value, int) and value > usable_cores()
        )
        if fits and not any(type(v) is type(value) and v == value for v in spec.values):
            spec = replace(spec, values=(value, *spec.values))
        out.append(spec)
    return out


def _int_candidates(lo: int, hi: int) -> tuple[int, ...]:
    values = {lo, hi}
    v = 1
    while v < hi:
        if v > lo:
            values.add(v)
        v *= 2
    ordered = sorted(values)
    if len(ordered) > MAX_INT_CANDIDATES:
        ordered = [*ordered[: MAX_INT_CANDIDATES - 1], ordered[-1]]
    return tuple(ordered)


def catalogue_space(device: str) -> list[KnobSpec]:
    """The knob catalogue as KnobSpecs (batch knobs included; the ladder skips them)."""
    from torchdoctor.knobs import (
        BUCKET_CAP_MB,
        COMPILE,
        NUM_WORKERS,
        OPTIMIZER_IMPL,
        PERSISTENT_WORKERS,
        Choice,
        IntRange,
        catalogue,
    )

    on_cpu = not device.startswith("cuda")
    specs = []
    for knob in catalogue():
        if isinstance(knob.domain, Choice):
            values: tuple[Any, ...] = tuple(knob.domain.values)
            if on_cpu and knob.name == COMPILE.name:
                values = tuple(v for v in values if v not in CUDA_ONLY_COMPILE_MODES)
            if knob.name == OPTIMIZER_IMPL.name:
                # The fused update first: one pass over each parameter where foreach makes
                # several and the for-loop several per tensor (the zoo's for-loop Adam: fused
                # 5.3x, foreach 0.89x here), so the value most likely to win is tried while
                # the budget lasts; foreach is still tried from it.
                values = tuple(sorted(values, key=lambda v: v != "fused"))
        elif isinstance(knob.domain, IntRange):
            values = _int_candidates(knob.domain.lo, min(knob.domain.upper, 64))
            if knob.name == BUCKET_CAP_MB.name:
                values = BUCKET_CANDIDATES_MB
            if knob.name == NUM_WORKERS.name:
                values = worker_candidates(usable_cores(), knob.domain.upper)
        else:  # pragma: no cover - a new domain type must be taught to the tuner
            continue
        paired = ((PERSISTENT_WORKERS.name, True),) if knob.name == NUM_WORKERS.name else ()
        specs.append(KnobSpec(knob.name, values, knob.safety, knob.default_for(device), paired))
    return specs


def recipe_validator(
    workload: str | None, device: str, *, params: dict[str, Any] | None = None
) -> Callable[[dict[str, Any]], str | None]:
    """A function returning why a recipe cannot run here (None when it can).

    For a setting that does not apply here the reason is the knob's own, without the value
    ("it only acts on CUDA devices ..."), so that the values of one knob share one reason.
    Without a workload (a user's script) the catalogue's rules on this device alone; `params`:
    the workload's own (`tune --param`), which decide what applies to it (a hand-written
    attention can be switched to SDPA).
    """
    from torchdoctor.core.errors import KnobError, KnobNotApplicable
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads import get_workload

    wl = get_workload(workload, **(params or {})) if workload is not None else None

    def validate(recipe: dict[str, Any]) -> str | None:
        try:
            Recipe.from_dict(recipe, workload=wl, device=device)
        except KnobNotApplicable as exc:
            return exc.reason
        except KnobError as exc:
            return str(exc)
        return None

    return validate
