"""A simulated training session whose step time, memory and loss follow a declared model.

It lets the tuner's logic be tested deterministically and fast (no torch), with knobs planted
to do nothing, to help by a known factor, to break learning, to crash, hang or run out of
memory. Step times are drawn from a seeded log-normal around the modelled time, so the
statistics see realistic noise; with ``sleep=True`` the session also really waits that long
(used by the SIGKILL-and-resume test, which needs trials that take wall time).

Model options (all JSON-serializable, passed through `SessionSpec.options`):

- ``base_step_s``: step time of the default recipe at ``base_batch``.
- ``effects``: ``{knob: {str(value): factor}}``; step time is multiplied by each factor.
- ``joint_effects``: ``[[{knob: str(value), ...}, factor], ...]``; step time is multiplied by
  the factor of every entry whose settings the recipe all has: changes that pay only together.
- ``batch_exponent``: step time scales as ``(batch / base_batch) ** batch_exponent``.
- ``bytes_per_sample`` / ``memory_limit_bytes``: peak memory model and the simulated device
  capacity (above it, preparing raises MemoryError like an allocation failure). The peak is
  ``fixed_bytes`` plus ``bytes_per_sample`` times the micro-batch (``batch_size``) times every
  factor of ``memory_effects`` (``{knob: {str(value): factor}}``: bf16 or checkpointing saving
  activation memory); ``memory_noise`` (relative) draws each chunk's peak around it.
- ``grad_accum`` in the recipe: a step runs that many micro-batches (step time and samples
  times it; the peak is one micro-batch's).
- ``loss_shift``: ``{knob: {str(value): shift}}``; the loss is multiplied by ``1 + shift``
  (a change that moves the trajectory a little, like compilation's reordered arithmetic).
- ``noise``: relative standard deviation of step times; ``noise_seed`` varies it per tune.
- ``first_session_effects``: like ``effects``, but only for the first session of a recipe
  prepared in this process (with this model): a stand-in for the "process lottery", a worker
  that runs a recipe a little faster or slower than a fresh one would. In-process studies only.
- ``process_spread``: sd of a lognormal speed factor drawn for every session (a new process
  each): how much one process of a recipe runs faster or slower than another;
  ``process_spread_after`` (default 0): sessions of a recipe before this one run at their
  nominal speed (the ladder's pair happened to be typical).
- ``drift_path``: a file shared by every session: each ``run_steps`` call appends a byte to it,
  and stretches of ``drift_period`` calls (counted over all processes) alternate between the
  nominal speed and step times ``drift_factor`` times longer: the machine itself slowing and
  recovering over seconds (another tenant, its clock), whichever process runs then.
- ``nan``/``diverge``/``crash``/``hang``/``allocate``/``error``: ``{knob: str(value)}`` triggers.
- ``log_path``: append one line per prepared session (counts executions across processes).
- ``stall_once`` with ``stall_path``: ``{knob: str(value)}``; the first session of a triggering
  recipe over all processes writes its process id to ``stall_path`` and hangs (a tuner to
  SIGKILL mid-trial); later ones, its retry, run normally.
"""

from __future__ import annotations

import collections
import json
import math
import os
import time
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SimStep:
    index: int
    total_s: float
    loss: float | None
    samples: int


#: Sessions prepared so far per (recipe, seed, model), for ``first_session_effects``.
_PREPARED: collections.Counter[str] = collections.Counter()


def _triggered(recipe: dict[str, Any], triggers: dict[str, Any] | None) -> bool:
    return any(str(recipe.get(k)) == str(v) for k, v in (triggers or {}).items())


class SimulatedSession:
    def __init__(
        self, recipe: dict[str, Any], seed: int, *, perturbation: int = 0, **model: Any
    ) -> None:
        self.recipe = recipe
        self.model = model
        self.batch = int(recipe.get("batch_size", model.get("base_batch", 32)))
        self.accum = int(recipe.get("grad_accum") or 1)
        base_batch = int(model.get("base_batch", 32))
        step_s = float(model.get("base_step_s", 0.01)) * self.accum
        step_s *= (self.batch / base_batch) ** float(model.get("batch_exponent", 1.0))
        for knob, factors in (model.get("effects") or {}).items():
            step_s *= float(factors.get(str(recipe.get(knob)), 1.0))
        for settings, factor in model.get("joint_effects") or []:
            if all(str(recipe.get(k)) == str(v) for k, v in settings.items()):
                step_s *= float(factor)
        key = json.dumps([recipe, seed, model], sort_keys=True, default=str)
        ordinal = _PREPARED[key]
        if ordinal == 0:
            for knob, factors in (model.get("first_session_effects") or {}).items():
                step_s *= float(factors.get(str(recipe.get(knob)), 1.0))
        _PREPARED[key] += 1
        spread = float(model.get("process_spread", 0.0))
        if spread and ordinal >= int(model.get("process_spread_after", 0)):
            # This session's process runs its recipe a little faster or slower than another
            # (memory placement, cores), by a lognormal factor of its own.
            lottery = json.dumps([recipe, seed, ordinal, model.get("noise_seed", 0)], default=str)
            draw = np.random.default_rng(zlib.crc32(lottery.encode()))
            step_s *= float(draw.lognormal(0.0, spread))
        self.step_s = step_s
        self.nominal_peak_bytes = simulated_peak_bytes(recipe, model)
        self.memory_rng = np.random.default_rng(zlib.crc32(key.encode()) + 1)
        self.index = 0
        # Each session of a recipe is a new process, with step-time noise of its own (the
        # first keeps the noise it always had, so single-session tests are unchanged).
        noise_key: list[Any] = [recipe, seed, model.get("noise_seed", 0)]
        key = json.dumps(noise_key + ([ordinal] if ordinal else []), sort_keys=True, default=str)
        self.rng = np.random.default_rng(zlib.crc32(key.encode()))
        # A no-op perturbation (a quality reference run) draws other loss noise from the
        # same model, as a rounding-sized change does to a chaotic training run.
        self.loss_rng = np.random.default_rng([seed, perturbation] if perturbation else seed)

    @property
    def peak_memory_bytes(self) -> int:
        """This chunk's peak (read once per chunk by the worker), around the modelled one."""
        noise = float(self.model.get("memory_noise", 0.0))
        if not noise:
            return self.nominal_peak_bytes
        return int(self.nominal_peak_bytes * (1.0 + noise * float(self.memory_rng.uniform(-1, 1))))

    def _loss(self, i: int) -> float:
        loss = 2.0 * math.exp(-0.05 * i) + 0.2 + 0.002 * float(self.loss_rng.standard_normal())
        if _triggered(self.recipe, self.model.get("nan")) and i >= 2:
            return float("nan")
        if _triggered(self.recipe, self.model.get("diverge")):
            return loss * (1.0 + 0.2 * i)
        for knob, shifts in (self.model.get("loss_shift") or {}).items():
            loss *= 1.0 + float(shifts.get(str(self.recipe.get(knob)), 0.0))
        return loss

    def _drift(self) -> float:
        path = self.model.get("drift_path")
        if not path:
            return 1.0
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, b".")
            calls = os.fstat(fd).st_size
        finally:
            os.close(fd)
        slow = (calls - 1) // int(self.model.get("drift_period", 1)) % 2 == 1
        return float(self.model.get("drift_factor", 1.0)) if slow else 1.0

    def run_steps(self, n: int, *, measure_phases: bool = False) -> list[SimStep]:
        steps = []
        sigma = float(self.model.get("noise", 0.02))
        drift = self._drift()
        for _ in range(n):
            total = self.step_s * drift * float(self.rng.lognormal(0.0, sigma))
            if self.model.get("sleep"):
                time.sleep(total)
            samples = self.batch * self.accum
            steps.append(SimStep(self.index, total, self._loss(self.index), samples))
            self.index += 1
        return steps


def simulated_peak_bytes(recipe: dict[str, Any], model: dict[str, Any]) -> int:
    """The modelled peak memory of `recipe` (see the module docstring)."""
    per_sample = float(model.get("bytes_per_sample", 1_000_000))
    for knob, factors in (model.get("memory_effects") or {}).items():
        per_sample *= float(factors.get(str(recipe.get(knob)), 1.0))
    batch = int(recipe.get("batch_size", model.get("base_batch", 32)))
    return int(model.get("fixed_bytes", 0)) + int(per_sample * batch)


def make_session(
    workload: str,
    recipe: dict[str, Any],
    *,
    device: str,
    seed: int,
    perturbation: int = 0,
    **model: Any,
) -> SimulatedSession:
    """Session factory (see `torchdoctor.procs.SessionSpec.factory`, and
    `tune_sim.SIMULATED_FACTORY`)."""
    if model.get("log_path"):
        with open(model["log_path"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps(recipe, sort_keys=True) + "\n")
    if _triggered(recipe, model.get("crash")):
        os._exit(3)  # a hard crash: no exception, no cleanup, like a segfaulting extension
    if _triggered(recipe, model.get("hang")):
        time.sleep(3600)
    if _triggered(recipe, model.get("stall_once")):
        try:
            fd = os.open(model["stall_path"], os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            pass  # stalled once already: this is the retry
        else:
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            time.sleep(3600)
    if _triggered(recipe, model.get("error")):
        raise RuntimeError("simulated failure while building the model")
    if _triggered(recipe, model.get("allocate")):
        hog = b"\x01" * int(model.get("allocate_bytes", 2 << 30))  # writes, so pages are resident
        time.sleep(30)
        del hog
    limit = model.get("memory_limit_bytes")
    need = simulated_peak_bytes(recipe, model)
    if limit is not None and need > int(limit):
        raise MemoryError(f"simulated allocation of {need} bytes exceeds {limit}")
    return SimulatedSession(recipe, seed, perturbation=perturbation, **model)
