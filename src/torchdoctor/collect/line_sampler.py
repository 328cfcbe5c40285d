"""Host time to Python lines: a sampler thread on `sys._current_frames()`.

Every `SAMPLE_INTERVAL_S` a daemon thread reads the main thread's current frame, walks it
outwards and keeps the user frames (outside the standard library, site-packages and
torchdoctor): the innermost one is the line the host was running or waiting in, the rest its
callers. Each sample carries the step it fell in and the phase the step recorder says the main
thread was in (data wait, forward, backward, optimizer, or other), read under the GIL in the
same moment as the stack. It samples only inside steps; `aggregate` keeps the steady ones
(after the warm-up rule of `measure.warmup_length`, outside the profiled window, which the
profiler slows).

The sampler needs the GIL to look: it gets it at once while torch runs an operator
(operators release it) but waits up to the switch interval behind pure Python. Two things
keep that from biasing the lines. While it runs, the switch interval is lowered to
`SWITCH_INTERVAL_S`, so a Python loop is seen within a fraction of a millisecond of the
sample's time. And samples are stratified by phase, because raw samples still over-count
the phases that run operators (at the default interval, on a zoo script with 26% of its step
in one Python line, the forward drew 53% of the raw samples and held 13% of the measured
step). The step recorder times each phase exactly; the samples only say, within a phase,
which lines its time went to. A line's time is therefore, summed over phases, the phase's
measured time times the line's fraction of that phase's samples. A phase with time and no
sample leaves its time unattributed (`unsampled_share`). On a GPU the recorder times phases
by CUDA events, on the device, which the host's samples cannot be weighed by: there each
sample stands for an equal part of the steps' wall time.

Why this sampler and not another (each was weighed for overhead, fidelity and what it needs):
- py-spy reads the process from outside with ptrace: no overhead in the process, but an
  install and `CAP_SYS_PTRACE` (denied in most containers and CI runners), and it cannot know
  the step recorder's phase or the steady-step markers without a second channel.
- pyinstrument (and cProfile) hook every Python call through `sys.setprofile`/`setstatprofile`:
  their cost grows with the call rate of the code, which is highest in exactly the
  host-bound, call-heavy scripts this measures, and they stay on for the whole run.
- torch.profiler's `with_stack=True` records a Python stack per operator: it names only lines
  that issue operators (pure-Python host work, the usual other-host time, is invisible), and
  only inside the profiled window, at several times the window's own overhead.
- a timer signal (`setitimer`, vmprof's way) would run a handler in the main thread itself,
  free of the GIL's timing, but it interrupts system calls in every thread of the process
  (torch's pools, gloo's sockets) and collides with a script's own alarms.
- This thread's cost does not depend on what the script runs: one `sys._current_frames()` and
  a walk of at most `MAX_STACK_DEPTH` frames per sample, recording code objects and
  instruction offsets only (names and lines are resolved after, once per distinct frame),
  1/`SAMPLE_INTERVAL_S` times a second until the shares have the samples they need
  (`SAMPLES_NEEDED`) and less often after, only inside steps, with nothing installed and no
  privilege. Its overhead as a share of step
  time is measured by `benchmarks/bench_line_sampler.py` (a paired interval, sampler on vs
  off; the target is under 3%); the figure is in benchmarks/RESULTS.md once the lead has run
  it on an idle machine.
Its limit: it sees Python frames only, so time in one long C call (a big matmul that holds
the stack still) goes to the line that called it, which is the line a person would change.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any, Final

from torchdoctor.core.hostlines import HostFunction, HostLine, HostLineProfile
from torchdoctor.core.steps import PHASES, Phase, StepTiming
from torchdoctor.measure import warmup_length

#: Sampling period. 5 ms is CPython's default GIL switch interval (`sys.getswitchinterval()`):
#: a thread waiting for the GIL behind pure-Python work gets it about that often anyway, so a
#: shorter period buys no resolution there. At 200 samples a second a 3 s steady window holds
#: ~600 samples, and a line with 10% of the time is known to about +-1.2 points (binomial).
SAMPLE_INTERVAL_S: Final = 0.005
#: Samples the shares need: with this many, any line's share of the sampled time is known to
#: +-3 points (95% binomial interval at the worst case, a share of 50%: 1.96 * sqrt(0.25 / n)),
#: the size of the smallest share a finding acts on (`diagnose.findings.LOW_SHARE`, 3%).
#: Until a run has taken them the sampler keeps `SAMPLE_INTERVAL_S` (a short run needs every
#: sample it gets); past them its interval grows in proportion to the samples taken
#: (`interval_after`), so a long run's sample count grows with the logarithm of its length
#: rather than with it, and the sampler's cost per second of steps falls as 1/time. Samples
#: are weighted by the interval they were taken at (`SampleCounts.weight`), so steps sampled
#: sparser count as much as those sampled densely.
SAMPLES_NEEDED: Final = 1068
#: GIL switch interval while the sampler runs. The sampler reads the main thread's stack
#: only once it holds the GIL: it takes it at once when the main thread releases it (an
#: operator, a sleep), but behind pure Python it waits up to the switch interval (5 ms by
#: default), and in that window any releasing call the main thread makes takes the sample,
#: so a Python loop between two such calls goes unseen (measured here: a data loader whose
#: `__getitem__` spent ~2 ms in a Python loop and then called torch.full had its samples on
#: the torch.full line). At 0.2 ms the window is a tenth of such a loop; the main thread is
#: asked to switch only when a thread waits, 1/SAMPLE_INTERVAL_S times a second here.
SWITCH_INTERVAL_S: Final = 0.0002
#: Most user frames kept per sample (the line and its callers); a training loop's host work
#: is rarely deeper below the script's main.
MAX_USER_FRAMES: Final = 8
#: Frames walked from the innermost outwards; a deeper stack (recursion) is cut here.
MAX_STACK_DEPTH: Final = 64
#: Where torch.compile's frame evaluator lives. While it compiles a frame (PEP 523), the
#: frame it intercepted sits below its Python frames, not yet whole, and reading it from
#: another thread crashes the interpreter (seen as a segfault in `frame.f_code` under a
#: compiled forward). So a walk stops, and the sample is dropped, at the first frame of this
#: package: no frame below it is read. `torch.compiler._is_compiling_flag` (set for a whole
#: compile session) drops the samples of a compile before any frame is read.
COMPILER_FRAMES: Final = f"{os.sep}torch{os.sep}_dynamo{os.sep}"
#: Lines and functions kept in the record, largest first.
TOP_LINES: Final = 15
TOP_FUNCTIONS: Final = 10
#: Caller chains named per line.
TOP_CALLERS: Final = 3
SAMPLER_NAME: Final = "current_frames_thread"

#: (file, line, function, first line of the function)
Frame = tuple[str, int, str, int]
Stack = tuple[Frame, ...]
#: (step index, phase, user frames innermost first)
SampleKey = tuple[int, Phase, Stack]
#: What a sample records under the GIL, resolved to a `Frame` later: (the id of the frame's
#: code object, which the sampler keeps alive, and its last instruction's offset, `f_lasti`).
RawFrame = tuple[int, int]
RawKey = tuple[int, Phase, tuple[RawFrame, ...]]
#: Raw user frames kept per sample: a comprehension, generator expression or lambda folds into
#: its caller's line when resolved (`_folds_into`), so twice `MAX_USER_FRAMES` leaves that many
#: after folding.
RAW_USER_FRAMES: Final = 2 * MAX_USER_FRAMES


#: The built-in workloads are the user's code of a `diagnose --workload` run, though they ship
#: inside torchdoctor.
WORKLOADS_DIR: Final = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "workloads", ""
)


def _library_dirs() -> tuple[str, ...]:
    """Folders whose code is not the user's: the standard library, site-packages, the
    environment's console scripts (`torchdoctor` itself), ours."""
    paths = sysconfig.get_paths()
    dirs = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib", "scripts")}
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return tuple(sorted(os.path.abspath(d) + os.sep for d in {*dirs, ours} if d))


LIBRARY_DIRS: Final = _library_dirs()


def is_user_file(filename: str, library_dirs: Sequence[str] = LIBRARY_DIRS) -> bool:
    """Whether `filename` is the user's code (not `<frozen ...>`, stdlib, site-packages, ours
    except the built-in workloads)."""
    if not filename or filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    return path.startswith(WORKLOADS_DIR) or not path.startswith(tuple(library_dirs))


def user_stack(
    frame: Any, *, is_user: Callable[[str], bool] = is_user_file, limit: int = MAX_USER_FRAMES
) -> Stack:
    """The user frames of the stack ending in `frame`, innermost first (at most `limit`).

    `frame` is a frame object or anything with `f_code.co_filename/co_name/co_firstlineno`,
    `f_lineno` and `f_back` (tests pass fakes).
    """
    out: list[Frame] = []
    seen: dict[str, bool] = {}
    depth = 0
    while frame is not None and depth < MAX_STACK_DEPTH and len(out) < limit:
        code = frame.f_code
        name = code.co_filename
        user = seen.get(name)
        if user is None:
            user = seen[name] = is_user(name)
        if user:
            here = (name, int(frame.f_lineno or 0), code.co_name, int(code.co_firstlineno))
            if out and _folds_into(out[-1], here):
                out[-1] = here
            else:
                out.append(here)
        frame = frame.f_back
        depth += 1
    return tuple(out)


def _folds_into(inner: Frame, caller: Frame) -> bool:
    """Whether `inner` is a generator expression, comprehension or lambda run from the same
    line of its caller: that line is one line of the caller's, named by the caller."""
    return (
        inner[2].startswith("<")
        and inner[2] != "<module>"
        and inner[0] == caller[0]
        and inner[1] == caller[1]
    )


@dataclass
class SampleCounts:
    """How many samples saw each (step, phase, stack), and the seconds of sampling interval
    they stand for (`weight`: a sample taken every 10 ms stands for twice the time of one
    taken every 5 ms). Samples added without an interval weigh one each."""

    count: Counter[SampleKey] = field(default_factory=Counter)
    weight: dict[SampleKey, float] = field(default_factory=dict)

    def add(self, key: SampleKey, n: int = 1, seconds: float | None = None) -> None:
        self.count[key] += n
        self.weight[key] = self.weight.get(key, 0.0) + (n if seconds is None else seconds)


def _compiling() -> bool:
    """Whether torch.compile is compiling now (its session flag; False without torch)."""
    compiler = sys.modules.get("torch.compiler")
    return bool(getattr(compiler, "_is_compiling_flag", False))


def interval_after(samples: int, base_s: float = SAMPLE_INTERVAL_S) -> float:
    """The sampling interval once `samples` samples were taken inside steps: `base_s` until
    `SAMPLES_NEEDED`, then growing in proportion (see `SAMPLES_NEEDED`)."""
    return base_s * max(1.0, samples / SAMPLES_NEEDED)


class LineSampler:
    """The sampler thread (see the module docstring). `where` says, from the sampler thread,
    which step and phase the main thread is in, or None outside steps (nothing sampled).

    A sample holds the GIL, so it does the least it can while it does: it walks the frames
    recording each user frame's code object (by id) and last instruction offset, deciding
    "user or not" once per code object, and counts that raw stack. File names, line numbers
    (from the offset, `line_at`) and the folding of comprehensions into their callers' lines
    are worked out once per distinct frame when `counts` is read, after or between samples.
    """

    def __init__(
        self,
        where: Callable[[], tuple[int, Phase] | None],
        *,
        interval_s: float = SAMPLE_INTERVAL_S,
        thread_id: int | None = None,
        frames: Callable[[], Mapping[int, FrameType]] = sys._current_frames,
        is_user: Callable[[str], bool] = is_user_file,
    ) -> None:
        self.where = where
        self.interval_s = interval_s
        self.thread_id = thread_id if thread_id is not None else threading.main_thread().ident
        self.is_user = is_user
        self._counts = SampleCounts()
        #: Raw samples since `counts` was last read: (how many, seconds of interval).
        self._raw: dict[RawKey, list[float]] = {}
        self._taken = 0  # samples inside steps, which set the interval (`interval_after`)
        self._lock = threading.Lock()  # between the sampling thread and `counts`' reader
        #: Code objects seen, by id, kept alive so that an id is never reused meanwhile.
        self._codes: dict[int, CodeType] = {}
        self._user: dict[int, bool] = {}
        self._stop_codes: set[int] = set()
        self._resolved: dict[RawFrame, Frame] = {}
        self._frames = frames
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._switch = self._ours = sys.getswitchinterval()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping = False
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch, SWITCH_INTERVAL_S))
        self._ours = sys.getswitchinterval()  # as CPython rounds it
        self._thread = threading.Thread(
            target=self._run, name="torchdoctor-line-sampler", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stopping = True
            thread.join()
            if sys.getswitchinterval() == self._ours:
                sys.setswitchinterval(self._switch)  # unless the script set its own since

    def _run(self) -> None:
        # `time.sleep` releases the GIL and is one C call; an Event's timed wait runs a
        # Condition's Python code on every wake-up, under the GIL the main thread wants.
        # Stopping waits for the current sleep (one interval) to end.
        sleep = time.sleep
        while True:
            sleep(self.current_interval_s())
            if self._stopping:
                return
            self.sample_once()

    def current_interval_s(self) -> float:
        return interval_after(self._taken, self.interval_s)

    def sample_once(self) -> None:
        """Take one sample (the thread's loop body; tests call it with fakes)."""
        where = self.where()
        if where is None or self.thread_id is None:
            return  # outside steps: no step's time
        if _compiling():
            return  # see COMPILER_FRAMES
        frame: Any = self._frames().get(self.thread_id)
        if frame is None:
            return
        user = self._user
        raw: list[RawFrame] = []
        depth = 0
        while frame is not None and depth < MAX_STACK_DEPTH:
            code = frame.f_code
            known = user.get(id(code))
            if known is None:
                known = None if id(code) in self._stop_codes else self._learn(code)
            if known is None:  # the compiler's frame evaluator: nothing below is read
                del frame
                return
            if known:
                raw.append((id(code), frame.f_lasti))
                if len(raw) == RAW_USER_FRAMES:
                    break
            frame = frame.f_back
            depth += 1
        del frame  # a frame reference keeps the main thread's locals alive
        key = (where[0], where[1], tuple(raw))
        seconds = self.current_interval_s()
        self._taken += 1
        with self._lock:
            seen = self._raw.get(key)
            if seen is None:
                self._raw[key] = [1, seconds]
            else:
                seen[0] += 1
                seen[1] += seconds

    def _learn(self, code: Any) -> bool | None:
        """Whether `code` is the user's; None for the compiler's (`COMPILER_FRAMES`)."""
        self._codes[id(code)] = code
        if COMPILER_FRAMES in code.co_filename:
            self._stop_codes.add(id(code))
            return None
        known = self._user[id(code)] = self.is_user(code.co_filename)
        return known

    @property
    def counts(self) -> SampleCounts:
        """The samples so far by (step, phase, user frames innermost first): the raw ones
        taken since the last read are resolved here, out of the sampling thread's way."""
        with self._lock:
            raw, self._raw = self._raw, {}
        for (step, phase, frames), (n, seconds) in raw.items():
            self._counts.add((step, phase, self._stack_of(frames)), int(n), seconds)
        return self._counts

    def _stack_of(self, frames: tuple[RawFrame, ...]) -> Stack:
        out: list[Frame] = []
        for raw in frames:
            here = self._resolved.get(raw)
            if here is None:
                code = self._codes[raw[0]]
                here = (code.co_filename, line_at(code, raw[1]), code.co_name, code.co_firstlineno)
                self._resolved[raw] = here
            if out and _folds_into(out[-1], here):
                out[-1] = here
            else:
                out.append(here)
        return tuple(out[:MAX_USER_FRAMES])

    def profile(
        self, steps: Sequence[StepTiming], *, exclude: Collection[int] = (), stratify: bool = True
    ) -> HostLineProfile:
        keep = steady_indices(steps, exclude=exclude)
        kept = [s for s in steps if s.index in keep]
        profile = aggregate(self.counts, kept, interval_s=self.interval_s, stratify=stratify)
        return profile.model_copy(update={"last_interval_s": self.current_interval_s()})


def line_at(code: Any, lasti: int) -> int:
    """The line `frame.f_lineno` reads for a frame of `code` whose last instruction is at
    byte offset `lasti` (`frame.f_lasti`), as CPython's `PyCode_Addr2Line` finds it: the
    function's first line before its first instruction, 0 where no line is known."""
    if lasti < 0:
        return int(code.co_firstlineno)
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return int(line or 0)
    return 0


def steady_indices(steps: Sequence[StepTiming], *, exclude: Collection[int] = ()) -> set[int]:
    """Indices of the steady steps: after the warm-up `measure.warmup_length` finds in the
    step times (never more than half of them), outside `exclude` (the profiled window)."""
    skip = min(warmup_length([s.total_s for s in steps]), len(steps) // 2)
    kept = [s.index for s in steps[skip:]]
    outside = [i for i in kept if i not in exclude]
    return set(outside if len(outside) >= max(1, len(kept) // 2) else kept)


def _site(frame: Frame) -> str:
    return f"{frame[0]}:{frame[1]} in {frame[2]}"


def aggregate(
    counts: SampleCounts,
    steps: Sequence[StepTiming],
    *,
    interval_s: float = SAMPLE_INTERVAL_S,
    sampler: str = SAMPLER_NAME,
    top_lines: int = TOP_LINES,
    top_functions: int = TOP_FUNCTIONS,
    stratify: bool = True,
) -> HostLineProfile:
    """The record of the samples that fell in `steps` (the steady ones), stratified by phase
    (module docstring): each innermost user line's share of those steps' time, by phase, with
    its commonest callers; each user function's inclusive share; each phase's measured share;
    the share of time whose samples had no user frame, and of time no sample fell in.

    Without `stratify` (phases timed on a device by CUDA events, not on the host the samples
    see), every sample stands for an equal part of the steps' wall time."""
    keep = {s.index for s in steps}
    phase_s: dict[Phase, float] = {p: sum(s.phases.get(p, 0.0) for s in steps) for p in PHASES}
    total = sum(s.total_s for s in steps)
    # Each phase's samples, by the sampling interval they stand for.
    phase_w: dict[Phase, float] = defaultdict(float)
    for key, w in counts.weight.items():
        if key[0] in keep:
            phase_w[key[1]] += w
    if not stratify and phase_w:
        every = sum(phase_w.values())
        phase_s = {p: total * phase_w.get(p, 0.0) / every for p in PHASES}
    # Seconds of each phase one unit of sample weight stands for.
    per_sample = {p: phase_s[p] / w for p, w in phase_w.items() if w > 0}
    empty = HostLineProfile(sampler=sampler, interval_s=interval_s, samples=0, steps=0, sampled_s=0)
    if total <= 0 or not per_sample:
        return empty
    samples = 0
    sampled_steps: set[int] = set()
    lines: dict[Frame, float] = defaultdict(float)
    line_phase: dict[Frame, dict[Phase, float]] = defaultdict(lambda: defaultdict(float))
    callers: dict[Frame, dict[Stack, float]] = defaultdict(lambda: defaultdict(float))
    functions: dict[tuple[str, str, int], float] = defaultdict(float)
    no_user = 0.0
    for (step, phase, stack), n in counts.count.items():
        if step not in keep:
            continue
        samples += n
        sampled_steps.add(step)
        seconds = counts.weight[(step, phase, stack)] * per_sample[phase]
        if not stack:
            no_user += seconds
            continue
        inner = stack[0]
        lines[inner] += seconds
        line_phase[inner][phase] += seconds
        callers[inner][stack[1:]] += seconds
        for fn in {(f[0], f[2], f[3]) for f in stack}:  # once per sample: inclusive
            functions[fn] += seconds
    per_step = 1.0 / len(steps)
    ranked = sorted(lines.items(), key=lambda kv: (-kv[1], kv[0]))[:top_lines]
    host_lines = [
        HostLine(
            file=f[0],
            line=f[1],
            function=f[2],
            share=min(1.0, w / total),
            seconds_per_step=w * per_step,
            phases={p: line_phase[f][p] / w for p in PHASES if line_phase[f].get(p)},
            callers=[
                " <- ".join(_site(c) for c in chain) if chain else "(no user caller)"
                for chain, _ in sorted(callers[f].items(), key=lambda kv: -kv[1])[:TOP_CALLERS]
            ],
        )
        for f, w in ranked
        if w > 0
    ]
    ranked_fns = sorted(functions.items(), key=lambda kv: (-kv[1], kv[0]))[:top_functions]
    unsampled = sum(phase_s[p] for p in PHASES if p not in per_sample)
    return HostLineProfile(
        sampler=sampler,
        interval_s=interval_s,
        samples=samples,
        steps=len(sampled_steps),
        sampled_s=total,
        phase_shares={p: phase_s[p] / total for p in PHASES if phase_s[p] > 0},
        outside_user_share=min(1.0, no_user / total),
        unsampled_share=min(1.0, unsampled / total),
        lines=host_lines,
        functions=[
            HostFunction(file=f, function=name, first_line=first, share=min(1.0, w / total))
            for (f, name, first), w in ranked_fns
        ],
    )
