"""A script driven step by step: the tuner's control channel inside the script's process.

`torchdoctor tune -- python train.py` compares recipes on the user's own script the way it
compares them on a built-in workload: two live processes run chunks of steps in turn. Here the
script's process is one of them. When the launch config names a control address
(`LaunchConfig.control`, "host:port"), the bootstrap connects to the tuner with
`multiprocessing.connection.Client` (the authkey comes hex-encoded in the environment variable
`CONTROL_AUTHKEY_ENV`, never in the config file, and is removed from the environment before
the script runs), and `StepController`, one more probe of the `Instrumentation`, pauses the
script at its step boundaries. The exchange (`procs/_script.py` is the other side; the
messages are the types of `collect/_channel.py`):

- script -> tuner `ScriptHello`; tuner -> script `DriverWelcome` (a seed or None): with a
  seed, `random`, numpy and torch (CPU and CUDA) are seeded before the script runs;
- at the second step boundary (`READY_BOUNDARY`) the script has run its start-up (imports,
  data, model build) and its first two training steps: `ScriptReady` (its start-up seconds,
  the seed, whether the script seeded itself, the `InjectionRecord` JSON of what each injected
  knob did by then, and the DataLoaders iterated so far as `DataLoaderInfo`), then it waits
  for a command;
- `DriverRun(n, release)` -> the script runs on, and after n more step boundaries
  `ScriptChunk` (rows of step seconds, samples and loss, and the peak memory) and it waits
  again; with `release`, CUDA's cached free blocks go back to the device first;
- `DriverRelease` -> `ScriptFreed`, the same on its own;
- `DriverPark(off)` -> `Parked`: on a GPU the parameters, gradients and optimizer state
  of every torch.optim optimizer the script has stepped, and the buffers of the modules owning
  those parameters, go to host memory (`off`) or back (`torchdoctor.engine.park`), so that
  the other arm of an A/B has the whole device; a script that captured CUDA graphs stays
  where it is, and says so. On a CPU, nothing moves;
- `DriverStop`, or the tuner going away -> `StopCollection` is raised at the boundary
  and the bootstrap unwinds as after a step limit;
- the script ending by itself mid-chunk -> `ScriptChunk` of the rows run with `ended` when it
  ended cleanly (exit code 0), `ScriptError` with `ended` when it failed or ended before the
  ready boundary.

Step boundaries, decided once per launch:

- optimizer mode: the end of each optimizer step as the step recorder sees it (the global
  torch.optim post-hook), so gradient accumulation counts one step per update;
- backward mode, for a script that has built no torch.optim optimizer by its second
  `backward()` (`BACKWARD_DECIDES`; parameters updated by hand): the return of each outermost
  `backward()`. By the second backward a whole iteration has run, so an optimizer built
  anywhere in the first one is seen, and a script that builds one waits for its steps (its
  first backward calls may be accumulation micro-steps). The hand-written update that follows
  a backward then runs at the start of the next chunk's first step, and the wait for a
  command between chunks comes before it, outside every row: both arms of an A/B are counted
  the same way, and every row still holds one whole update, forward and backward. (The step
  recorder's own backward-mode boundary, the next forward or batch fetch, is found only once
  the next step has begun, too late to pause at; its step times, which the tuner does not
  read, include that wait.)

The ready boundary is the second, not the first: knobs act where the script reaches their
site, and some sites come after the first boundary in the loop (nanoGPT calls
`zero_grad(set_to_none=True)` after `optimizer.step()`), so the injection record is read once
a whole iteration has run. A knob still not applied then never reached its site in a whole
iteration, and is reported once, with its reason.

What a row measures. `step_s` runs from one boundary to the next, so what the script does
between two boundaries that is not a training step (an evaluation loop, a checkpoint, logging
every N steps) counts in the step around it: it is the script's cost per step and both arms
pay it alike. The time spent waiting for a command is no step's: the clock of the next step
starts when the command arrives (in optimizer mode the step recorder's too). The start-up with
the first two steps, and whatever runs after the last boundary (a final evaluation, saving),
are no row's.
`samples` is the batch size the data probe saw in the step (None without a DataLoader). `loss`
is the mean of the scalar tensors `backward()` was called on in the step (several under
gradient accumulation), None when there was none or it was not finite. A tensor a GradScaler
scaled (`scaler.scale(loss).backward()`) counts as the loss it was scaled from: the scale is
2^16 at first and halves at every overflow, so the scaled values would tell the quality check
of the scaler's history, not of the training.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import random
import resource
import sys
import time
import weakref
from collections.abc import Callable, Iterator
from multiprocessing.connection import Client
from typing import TYPE_CHECKING, Any, Literal, Protocol

import torch
import torch.optim.optimizer as optim_mod

from torchdoctor.collect._channel import (
    DriverPark,
    DriverRelease,
    DriverRun,
    DriverStop,
    DriverWelcome,
    Parked,
    Row,
    ScriptChunk,
    ScriptError,
    ScriptFreed,
    ScriptHello,
    ScriptReady,
)
from torchdoctor.collect._lifeline import resume_children
from torchdoctor.collect.hooks import StopCollection, script_device
from torchdoctor.collect.probes import ProbeSite
from torchdoctor.collect.step_recorder import StepRecorder
from torchdoctor.core.errors import CollectError
from torchdoctor.engine import CUDAGRAPH_COMPILE_MODES
from torchdoctor.knobs import COMPILE, CUDA_GRAPHS

if TYPE_CHECKING:
    from torchdoctor.engine import DeviceMover, Parking

#: Environment variable carrying the control channel's authkey (hex) to the script's process.
CONTROL_AUTHKEY_ENV = "TORCHDOCTOR_CONTROL_AUTHKEY"
#: The step boundary the script pauses at first (module docstring: one whole iteration has run
#: before it, so that knobs reached after the first boundary are judged).
READY_BOUNDARY = 2
#: The outermost backward() call at which a script with no torch.optim optimizer built is
#: driven at its backward calls (module docstring).
BACKWARD_DECIDES = 2


#: Why a script that captured CUDA graphs is not parked (`torchdoctor.engine.park`).
GRAPHS_CAPTURED = (
    "the script captured CUDA graphs, which hold the device addresses of its tensors and a "
    "private memory pool: it stays on the device"
)


#: Why a distributed script is not parked: DDP's reducer holds its gradients as views of its
#: buckets, and a moved gradient would no longer be one.
DISTRIBUTED = "the script runs torch.distributed, whose buckets hold its gradients: it stays"


def _distributed() -> str | None:
    dist = torch.distributed
    return DISTRIBUTED if dist.is_available() and dist.is_initialized() else None


class ControlError(CollectError):
    """The script's process cannot reach, or talk to, the process driving it."""


class Channel(Protocol):
    """What the controller talks through (a `multiprocessing.connection.Connection`)."""

    def send(self, obj: Any) -> None: ...

    def recv(self) -> Any: ...

    def close(self) -> None: ...


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ControlError(f"control address {text!r} is not host:port")
    return host, int(port)


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's generators (torch.manual_seed seeds CUDA's too)."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(seed % 2**32)


def attach_controller(
    address: str, inst: Any, *, controller_type: type[StepController] | None = None
) -> StepController:
    """Connect to the tuner at `address`, seed as it says, and compose the controller with
    `inst` (an `Instrumentation`, not yet installed). `controller_type`: a subclass to make
    (a torchrun rank's, collect/rank_control.py). Raises `ControlError`."""
    from multiprocessing import AuthenticationError

    key_hex = os.environ.pop(CONTROL_AUTHKEY_ENV, None)
    if not key_hex:
        raise ControlError(f"a control address is set but {CONTROL_AUTHKEY_ENV} is not")
    try:
        authkey = bytes.fromhex(key_hex)
    except ValueError:
        raise ControlError(f"{CONTROL_AUTHKEY_ENV} is not hex") from None
    try:
        conn = Client(parse_address(address), authkey=authkey)
        conn.send(ScriptHello(os.getpid()))
        welcome = conn.recv()
    except (OSError, EOFError, AuthenticationError) as exc:
        raise ControlError(f"cannot reach the tuner at {address}: {exc}") from None
    seed = welcome.seed if isinstance(welcome, DriverWelcome) else None
    if seed is not None:
        seed_everything(int(seed))
    cap = welcome.device_memory_cap_bytes if isinstance(welcome, DriverWelcome) else None
    controller = (controller_type or StepController)(
        conn,
        inst.recorder,
        uncounted=inst.syncs.uncounted,
        seed=None if seed is None else int(seed),
        device_memory_cap_bytes=cap,
    )
    return compose(controller, inst)


def compose(controller: StepController, inst: Any) -> StepController:
    """Make `controller` one more probe of `inst` (an `Instrumentation`, not yet installed)."""
    controller.loaders = lambda: [s.record().model_dump() for s in inst.data.loaders.values()]
    inst.add_probe(controller)
    return controller


def read_losses(steps: list[list[torch.Tensor]]) -> list[float | None]:
    """Each step's mean loss, read in one transfer for all the steps of a chunk.

    On CUDA that transfer is one device sync per chunk (the copy waits for the work queued
    before it), which the chunk's end needs anyway to be timed as the device ran it; the
    script's steps stay asynchronous within the chunk. On CPU it is a memory read.
    """
    flat = [t for step in steps for t in step]
    values: list[float] = []
    if flat:
        try:
            values = torch.stack([t.reshape(()).float() for t in flat]).tolist()
        except RuntimeError:  # losses on several devices: one read each
            values = [float(t) for t in flat]
    out: list[float | None] = []
    at = 0
    for step in steps:
        mine = values[at : at + len(step)]
        at += len(step)
        mean = sum(mine) / len(mine) if mine else None
        out.append(mean if mean is not None and math.isfinite(mean) else None)
    return out


def peak_memory_bytes(*, graph_pools: bool = False) -> int:
    """Device memory at its peak on CUDA (as a workload worker reports it), else peak RSS.

    With `graph_pools` (the recipe replays CUDA graphs) the reserved peak: the graphs'
    private pools never show in `max_memory_allocated` (engine.MemoryStats.cuda_peak_bytes)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        allocated = int(torch.cuda.max_memory_allocated())
        if graph_pools:
            return max(allocated, int(torch.cuda.max_memory_reserved()))
        return allocated
    # ru_maxrss is in KiB on Linux
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _limit_device_memory(cap_bytes: int) -> None:
    """Bound the script's device memory on its current GPU, as a workload worker's is
    (torch.cuda.set_per_process_memory_fraction: an allocation past it raises CUDA's OOM).
    Applied at the ready boundary, when the script has shown it runs on a GPU; on the host
    side a CUDA context alone takes about a GiB, so the cap is not read as RSS there."""
    index = torch.cuda.current_device()
    total = int(torch.cuda.get_device_properties(index).total_memory)
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / total), index)


def _reset_peak_memory() -> None:
    """Start the device's peak-memory window at a chunk's start (CUDA; the host's peak RSS
    cannot be reset this way)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.reset_peak_memory_stats()


def _release_device_memory() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


class StepController:
    """Pauses the script at step boundaries and runs chunks on command (module docstring).

    A probe of `Instrumentation` (collect/hooks.py), told of each step end after the others.
    `uncounted` keeps the controller's own loss read out of the sync probe's counts; `clock`
    is the host clock (a fake in tests).
    """

    def __init__(
        self,
        conn: Channel,
        recorder: StepRecorder,
        *,
        uncounted: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
        seed: int | None = None,
        clock: Callable[[], float] = time.perf_counter,
        device_memory_cap_bytes: int | None = None,
        mover: DeviceMover | None = None,
    ) -> None:
        self.conn = conn
        #: how the trained state leaves the GPU and comes back (default: the current CUDA
        #: device, once the script runs on one; a fake GPU in tests)
        self._mover = mover
        self._parking: Parking | None = None
        #: the modules whose buffers a park moves (`_trained_modules`), found at the first
        self._modules: weakref.WeakSet[torch.nn.Module] | None = None
        #: the torch.optim optimizers the script has stepped (what a park moves)
        self.optimizers: weakref.WeakSet[Any] = weakref.WeakSet()
        #: CUDA graphs the script captured (its own, torch.compile's): it cannot be parked
        self.graph_captures = 0
        #: the device memory the script may take once it is on a GPU (applied when ready)
        self.device_memory_cap_bytes = device_memory_cap_bytes
        self.recorder = recorder
        self.seed = seed
        self._uncounted = uncounted or contextlib.nullcontext
        self._clock = clock
        self._started = clock()
        self.ready = False
        self.stopping = False
        self.closed = False
        self.backward_calls = 0
        #: "optimizer" or "backward" once decided (module docstring), None before
        self.mode: Literal["optimizer", "backward"] | None = None
        #: step boundaries reached so far in this launch
        self.boundaries = 0
        self.script_seed_calls = 0
        #: the chunk in flight: steps wanted, and per step run so far its seconds, samples
        #: and the loss tensors backward() was called on
        self._want = 0
        self._release = False
        self._seconds: list[float] = []
        self._samples: list[int | None] = []
        self._losses: list[list[torch.Tensor]] = []
        self._step_losses: list[torch.Tensor] = []
        #: id(a tensor GradScaler.scale returned) -> (a reference to it, the loss it scaled)
        self._scaled: dict[int, tuple[weakref.ref[torch.Tensor], torch.Tensor]] = {}
        self._last = 0.0
        self._depth = 0
        #: the launch's recipe `Injection` (collect/inject), or None: its knob statuses go
        #: out with the ready message
        self.injection: Any = None
        #: the settings of the DataLoaders the script iterated so far (`DataLoaderInfo` JSON),
        #: sent with the ready message: a tuner learns the script's own num_workers there
        self.loaders: Callable[[], list[dict[str, Any]]] = list

    # ---- probe -----------------------------------------------------------------------------

    def install(self, site: ProbeSite) -> None:
        """Wrap backward (over the backward probe's wrapper) to keep the tensor it was called
        on, and the seeding functions to learn whether the script seeds itself."""

        def backward_wrap(original: Callable[..., Any], tensor_of: Callable[..., Any]) -> Any:
            def backward(*args: Any, **kwargs: Any) -> Any:
                outermost = self._depth == 0  # Tensor.backward calls torch.autograd.backward
                if outermost:
                    self.backward_calls += 1
                    tensor = tensor_of(*args, **kwargs)
                    if isinstance(tensor, torch.Tensor) and tensor.numel() == 1:
                        self._step_losses.append(self._unscaled(tensor))
                self._depth += 1
                try:
                    result = original(*args, **kwargs)
                finally:
                    self._depth -= 1
                if outermost:
                    self._backward_returned()
                return result

            return backward

        def first(tensors: Any = None, *_a: Any, **kw: Any) -> Any:
            tensors = kw.get("tensors", tensors)
            if isinstance(tensors, list | tuple) and len(tensors) == 1:
                return tensors[0]
            return tensors

        site.patcher.set(
            torch.Tensor, "backward", backward_wrap(torch.Tensor.backward, lambda t, *a, **k: t)
        )
        site.patcher.set(torch.autograd, "backward", backward_wrap(torch.autograd.backward, first))
        original_scale = torch.amp.GradScaler.scale

        def scale(scaler: Any, outputs: Any) -> Any:
            scaled = original_scale(scaler, outputs)
            if isinstance(outputs, torch.Tensor) and isinstance(scaled, torch.Tensor):
                self._scaled[id(scaled)] = (weakref.ref(scaled), outputs.detach())
            return scaled

        site.patcher.set(torch.amp.GradScaler, "scale", scale)
        site.handles.append(
            optim_mod.register_optimizer_step_post_hook(lambda opt, *_: self.optimizers.add(opt))
        )
        graph = getattr(torch.cuda, "CUDAGraph", None)
        if graph is not None:
            original_capture = graph.capture_begin

            def capture_begin(*args: Any, **kwargs: Any) -> Any:
                self.graph_captures += 1
                return original_capture(*args, **kwargs)

            site.patcher.set(graph, "capture_begin", capture_begin)
        for owner, name in self._seeders():
            site.patcher.set(owner, name, self._counting_seed(getattr(owner, name)))

    def _unscaled(self, tensor: torch.Tensor) -> torch.Tensor:
        """The loss `tensor` was scaled from by a GradScaler, else `tensor` (detached)."""
        ref, loss = self._scaled.pop(id(tensor), (None, None))
        return loss if ref is not None and ref() is tensor and loss is not None else tensor.detach()

    def _seeders(self) -> Iterator[tuple[Any, str]]:
        yield torch, "manual_seed"
        yield random, "seed"
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            yield numpy.random, "seed"

    def _counting_seed(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def seed(*args: Any, **kwargs: Any) -> Any:
            self.script_seed_calls += 1
            return original(*args, **kwargs)

        return seed

    def on_step_end(self) -> None:
        if self.recorder.detection != "optimizer_hook" or self.stopping:
            return  # the recorder's backward-mode boundaries come too late (module docstring)
        if self.mode is None:
            self.mode = "optimizer"
        if self.mode == "optimizer":
            self._boundary(self.recorder.last_samples)

    def _backward_returned(self) -> None:
        if self.stopping:
            return
        if (
            self.mode is None
            and self.backward_calls >= BACKWARD_DECIDES
            and not self.recorder.optimizer_exists
        ):
            self.mode = "backward"
            # The backward calls before this one were boundaries too, passed uncounted.
            self.boundaries = self.backward_calls - 1
        if self.mode == "backward":
            # The recorder's open step is this one: it closes only at the next forward.
            self._boundary(self.recorder.open_samples)

    def _boundary(self, samples: int | None) -> None:
        """A step boundary: start-up until `READY_BOUNDARY`, then a chunk's step end."""
        self.boundaries += 1
        losses, self._step_losses = self._step_losses, []
        self._scaled.clear()  # scaled tensors never backpropagated (a skipped backward)
        if self.boundaries < READY_BOUNDARY:
            return
        if not self.ready:
            self.ready = True
            self._send_ready()
            self._await_command()
            return
        self._samples.append(samples)
        self._losses.append(losses)
        if len(self._losses) < self._want:
            now = self._clock()
            self._seconds.append(now - self._last)
            self._last = now
            return
        # The chunk's last step: read its losses first, so that on CUDA the step's time
        # includes the device finishing the chunk (read_losses).
        values = self._read()
        self._seconds.append(self._clock() - self._last)
        self._send(self._chunk_reply(values))
        self._await_command()

    def _send_ready(self) -> None:
        """At the ready boundary: the device cap applied, `ScriptReady` sent."""
        device = script_device()
        if device == "cuda" and self.device_memory_cap_bytes:
            _limit_device_memory(self.device_memory_cap_bytes)
        self._send(self._ready_message(device))

    def _ready_message(self, device: str) -> ScriptReady:
        return ScriptReady(
            startup_s=self._clock() - self._started,
            seed=self.seed,
            script_seeded=self.script_seed_calls > 0,
            injection=self._injection_record(),
            loaders=self.loaders(),
            device=device,
        )

    def _injection_record(self) -> dict[str, Any] | None:
        if self.injection is None:
            return None
        record: dict[str, Any] = self.injection.record().to_json_dict()
        return record

    # ---- commands --------------------------------------------------------------------------

    def _next_command(self) -> object:
        """The driver's next command; `DriverStop` when the driver went away."""
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            # The driver died between chunks, its stopped children left behind: continued, they
            # can exit when the script shuts them down as it unwinds (collect/_lifeline.py).
            resume_children()
            return DriverStop()

    def _await_command(self) -> None:
        while True:
            message = self._next_command()
            if isinstance(message, DriverRun):
                steps = message.steps
                if not isinstance(steps, int) or steps < 1:
                    self._send(_error(f"run needs a step count >= 1, got {steps!r}"))
                    continue
                if self._parking is not None:  # a driver that did not unpark first still runs
                    self._move(off=False)
                self._want, self._release = steps, bool(message.release)
                self._seconds, self._samples, self._losses = [], [], []
                _reset_peak_memory()  # the chunk's peak, not the start-up's or warm-up's
                self._last = self._clock()
                return
            if isinstance(message, DriverStop):
                self.stopping = True
                raise StopCollection("stopped by the tuner")
            if isinstance(message, DriverRelease):
                _release_device_memory()
                self._send(ScriptFreed())
                continue
            if isinstance(message, DriverPark):
                self._send(self._move(off=bool(message.off)))
                continue
            self._send(_error(f"unknown command {message!r}"))

    def _move(self, *, off: bool) -> Parked:
        """Park (`off`) or unpark the optimizers' state; nothing off a GPU (module docstring)."""
        # The engine (and what it imports) is loaded only by a script on a GPU, on its first
        # park: a CPU script's start-up is not slowed by it.
        from torchdoctor.engine import CudaMover, Parking

        if self._parking is None:
            mover = self._mover
            if mover is None:
                if script_device() != "cuda":
                    return Parked()
                mover = CudaMover(torch.device("cuda", torch.cuda.current_device()))
            self._parking = Parking(mover)
        optimizers = list(self.optimizers)
        if off:
            pinned = GRAPHS_CAPTURED if self.graph_captures else _distributed()
            modules = self._trained_modules(optimizers)
            moved = self._parking.park(modules, optimizers, pinned=pinned)
        else:
            moved = self._parking.unpark()
        return Parked.of(moved)

    def _trained_modules(self, optimizers: list[Any]) -> list[torch.nn.Module]:
        """The modules owning a parameter the optimizers step, found once per launch (their
        buffers, such as BatchNorm's running statistics, are parked with them).

        Read from the garbage collector's objects, as the instrumentation's install reads
        the optimizers already built: once, at the first park, outside every step.
        """
        if self._modules is None:
            params = {id(p) for opt in optimizers for g in opt.param_groups for p in g["params"]}
            self._modules = weakref.WeakSet(
                o
                for o in gc.get_objects()
                if issubclass(type(o), torch.nn.Module)
                and any(id(p) in params for p in o.parameters(recurse=False))
            )
        return list(self._modules)

    def _read(self) -> list[float | None]:
        with self._uncounted():
            return read_losses(self._losses)

    def _chunk_reply(
        self, values: list[float | None], *, ended: bool = False, exit_code: int | None = None
    ) -> ScriptChunk:
        rows: list[Row] = [
            (s, n, v) for s, n, v in zip(self._seconds, self._samples, values, strict=False)
        ]
        peak = peak_memory_bytes(graph_pools=self._replays_graphs())
        if self._release:
            _release_device_memory()
        return ScriptChunk(rows, peak, ended=ended, exit_code=exit_code)

    def _replays_graphs(self) -> bool:
        """Whether the injected recipe replays CUDA graphs (cuda_graphs, or a compile mode
        that captures them)."""
        recipe: dict[str, Any] = getattr(getattr(self.injection, "recipe", None), "to_dict", dict)()
        return recipe.get(CUDA_GRAPHS.name) in (True, "true") or (
            recipe.get(COMPILE.name) in CUDAGRAPH_COMPILE_MODES
        )

    def _send(self, message: object) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(message)

    # ---- the script's end ------------------------------------------------------------------

    def finish(self, ended_by: str, exit_code: int, error: str | None) -> None:
        """The script ended (called by the bootstrap): tell the tuner how, once."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.stopping:
                return  # the tuner asked for it, or is gone
            if not self.ready:
                self._send(_error(error or self._no_step_reason(exit_code), ended=True))
            elif ended_by == "completed" or (ended_by == "sys_exit" and exit_code == 0):
                # Rows of the steps run so far; the tail after the last boundary is no step's.
                self._send(self._chunk_reply(self._read(), ended=True, exit_code=exit_code))
            else:
                reason = error or f"the script exited with code {exit_code}"
                self._send(_error(reason, ended=True, exit_code=exit_code))
        finally:
            with contextlib.suppress(OSError):
                self.conn.close()

    def _no_step_reason(self, exit_code: int) -> str:
        ended = f"the script ended (exit code {exit_code}) before it could be driven"
        if self.backward_calls == 0:
            return f"{ended}: it never called backward()"
        if self.mode is None and self.recorder.optimizer_exists:
            return (
                f"{ended}: it builds a torch.optim optimizer but never steps it (a script "
                "that builds one is driven at its optimizer steps)"
            )
        unit = "optimizer step" if self.mode == "optimizer" else "backward() call"
        return (
            f"{ended}: it ran {max(self.boundaries, 1)} {unit} and stopped, and the first "
            f"{READY_BOUNDARY} are its start-up (give it more steps)"
        )


def _error(reason: str, *, ended: bool = False, exit_code: int | None = None) -> ScriptError:
    return ScriptError(reason[:500], ended=ended, exit_code=exit_code)
