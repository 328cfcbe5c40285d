"""How a worker gets a training session: a picklable spec and an importable factory.

A worker process receives a `SessionSpec` (plain data, so it crosses a process
boundary) and builds the session by importing ``spec.factory`` ("module:function"). The
default factory prepares a built-in workload with the engine; the tests use a simulated
session (tests/sim_session.py) whose step times and losses follow a declared model.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from torchdoctor.core.errors import TuneError

#: The engine's factory, named through the package so that its module may move.
ENGINE_FACTORY = "torchdoctor.procs:engine_session"
#: Earlier names of `ENGINE_FACTORY`, as studies stored on disk (`tune_config.json`) spell it.
LEGACY_ENGINE_FACTORIES = frozenset({"torchdoctor.tune.session_spec:engine_session"})


def canonical_factory(path: str) -> str:
    """`path`, with an earlier name of the engine's factory read as `ENGINE_FACTORY`."""
    return ENGINE_FACTORY if path in LEGACY_ENGINE_FACTORIES else path


class StepLike(Protocol):
    """What a worker reads from one step (`torchdoctor.core.steps.StepTiming` fits)."""

    @property
    def total_s(self) -> float: ...
    @property
    def loss(self) -> float | None: ...
    @property
    def samples(self) -> int | None: ...


class SessionLike(Protocol):
    """A prepared training job that runs steps (`torchdoctor.engine.TrainingSession` fits)."""

    def run_steps(self, n: int, *, measure_phases: bool) -> Sequence[StepLike]: ...


@dataclass(frozen=True)
class SessionSpec:
    """Everything a worker needs to build one session, as plain picklable data.

    `factory` builds it ("module:function", called with the workload, the recipe, the device,
    the seed and `options`).
    """

    workload: str
    recipe: dict[str, Any]
    device: str = "cpu"
    seed: int = 0
    factory: str = ENGINE_FACTORY
    options: dict[str, Any] = field(default_factory=dict)
    #: > 0: a quality reference run, its initial weights carrying this no-op perturbation.
    perturbation: int = 0

    def with_recipe(self, recipe: dict[str, Any]) -> SessionSpec:
        return SessionSpec(
            self.workload, dict(recipe), self.device, self.seed, self.factory, dict(self.options)
        )


def resolve_factory(path: str) -> Any:
    """Import "module:function"; raise TuneError naming the path when it does not exist."""
    module_name, _, attr = canonical_factory(path).partition(":")
    if not module_name or not attr:
        raise TuneError(f"session factory {path!r} is not of the form 'module:function'")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise TuneError(f"cannot import session factory {path!r}: {exc}") from None


def build_session(spec: SessionSpec) -> SessionLike:
    factory = resolve_factory(spec.factory)
    # Factories take `perturbation` only when it is asked for, so a user's factory written
    # before reference runs existed still builds the sessions it always built.
    extra = {"perturbation": spec.perturbation} if spec.perturbation else {}
    session: SessionLike = factory(
        spec.workload,
        dict(spec.recipe),
        device=spec.device,
        seed=spec.seed,
        **spec.options,
        **extra,
    )
    return session


def engine_session(
    workload: str,
    recipe: dict[str, Any],
    *,
    device: str,
    seed: int,
    perturbation: int = 0,
    params: dict[str, Any] | None = None,
) -> SessionLike:
    """The real thing: a built-in workload prepared by the engine under `recipe`; `params`,
    the workload's own (`tune WORKLOAD --param name=value`, as a spec's `options`)."""
    from torchdoctor.engine import prepare
    from torchdoctor.knobs import Recipe
    from torchdoctor.workloads import get_workload

    wl = get_workload(workload, **(params or {}))
    session: SessionLike = prepare(
        wl, Recipe.from_dict(recipe), device=device, seed=seed, perturbation=perturbation
    )
    return session


def peak_memory_of(session: object) -> int | None:
    """The session's own peak-memory figure when it reports one (device memory on CUDA)."""
    read_memory = getattr(session, "read_memory", None)
    if callable(read_memory):  # the engine's TrainingSession -> MemoryStats
        stats = read_memory()
        # The compared device peak (graph pools included), else the allocated one (older).
        cuda = getattr(stats, "cuda_peak_bytes", None)
        if cuda is None:
            cuda = getattr(stats, "cuda_max_allocated_bytes", None)
        host = getattr(stats, "cpu_peak_rss_bytes", None)
        value = cuda if cuda is not None else host
        if isinstance(value, int):
            return value
    for name in ("peak_memory_bytes", "peak_memory"):
        value = getattr(session, name, None)
        if callable(value):
            value = value()
        if isinstance(value, int | float) and value >= 0:
            return int(value)
    return None
