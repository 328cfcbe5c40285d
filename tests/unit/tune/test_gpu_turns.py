"""A job using 60% of its GPU is tuned without a single out-of-memory trial.

Every arm of the study is a `SessionHost` (the workload worker's own request handling and
parking) in a process of `tests/fake_gpu.py`'s device: its weights, gradients and optimizer
state are live tensors on the device, which `empty_cache` does not free, and each step's
working set grows with the batch. The job's trained state takes half the device and a step
at the base batch another tenth: alone it peaks at 60%; beside a second resident copy
(the idle arm of an A/B, the new arm opened while the best lives, the quality reference)
it needs 110%.

The control below runs the same study with the turns and the worker's parking switched
off, as the tuner ran before: then the baseline's quality reference runs out of memory and
the tune cannot even start. With them, the baseline, its references, the ladder's trials,
the second pairs, the batch search up to the batch that truly fits (128: 0.5 + 0.4 of the
device) and the final confirmation all run with one arm resident at a time.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fake_gpu import FakeCuda, FakeGpu
from torchdoctor.core.errors import TuneError
from torchdoctor.procs import Parked, Prepare, ReplyT, Request, SessionHost, SessionSpec
from torchdoctor.tune.arms import Arm, MeasurePlan, Timeout
from torchdoctor.tune.ladder import ClimbOutcome, LadderPlan, climb
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.records import TrialResult
from torchdoctor.tune.sources import ArmSource
from torchdoctor.tune.space import KnobSpec
from torchdoctor.tune.study import Study
from torchdoctor.tune.tuner import Tuner, TuneSettings
from torchdoctor.tune.turns import DeviceTurns, SharingMode

CAPACITY = 2**18  # bytes of the fake device (small: the model is real torch, on a CPU)
#: The job: its trained state takes half the device, a step's activations a tenth at batch
#: 32 (0.2 at 64, 0.4 at 128), and its step time grows as the square root of the batch, so
#: each doubling is a real throughput win while it fits.
JOB = {
    "state_share": 0.5,
    "workspace_share": 0.1,
    "base_batch": 32,
    "batch_exponent": 0.5,
    "noise": 0.02,
    "effects": {"fast": {"True": 0.7}},
}
MAX_BATCH = 128  # 0.5 + 0.4 of the device: the largest batch that fits on its own


class FakeGpuWorker:
    """A worker process on the fake GPU: the real `SessionHost` with that process's
    allocator as its `torch.cuda` and its mover; closing it ends the process."""

    def __init__(self, gpu: FakeGpu) -> None:
        self.cuda = FakeCuda(gpu)
        self.host = SessionHost(cuda=self.cuda, mover=self.cuda)
        self.parks: list[Parked] = []

    def request(self, message: Request[ReplyT], *, timeout_s: float) -> ReplyT:
        assert not self.cuda.closed
        FakeCuda.active = self.cuda
        try:
            reply = message.expect(self.host.handle(message))
        finally:
            FakeCuda.active = None
        if isinstance(reply, Parked):
            self.parks.append(reply)
        return reply

    def close(self) -> None:
        self.host.close()
        self.cuda.exit()


class FakeGpuArms(ArmSource):
    """Arms of the job, each a worker process on `gpu`."""

    def __init__(
        self, gpu: FakeGpu, plan: MeasurePlan, turns: DeviceTurns, job: dict[str, Any] = JOB
    ) -> None:
        self.gpu, self.plan, self.turns = gpu, plan, turns
        self.spec = SessionSpec("job", {}, device="cuda", factory="fake_gpu:make_job", options=job)
        self.workers: list[FakeGpuWorker] = []

    def prepare(self, recipe: dict[str, Any], *, timeout: Timeout, log_path: Path | None) -> Arm:
        return self._start(self.spec.with_recipe(recipe), timeout)

    def prepare_reference(
        self, recipe: dict[str, Any], perturbation: int, *, timeout: Timeout, log_path: Path | None
    ) -> Arm:
        spec = replace(self.spec.with_recipe(recipe), perturbation=perturbation)
        return self._start(spec, timeout)

    def _start(self, spec: SessionSpec, timeout: Timeout) -> Arm:
        recipe = spec.recipe
        worker = FakeGpuWorker(self.gpu)
        self.workers.append(worker)
        try:
            reply = worker.request(Prepare(spec), timeout_s=timeout())
        except BaseException:
            worker.close()
            raise
        return Arm(
            recipe=dict(recipe),
            worker=worker,
            objective="throughput",
            prepare_s=reply.prepare_s,
            release_after_run=True,  # a GPU arm
        )


class NoTurns(DeviceTurns):
    """The tuner before arms took turns: nothing is parked."""

    def take(self, arm: Any, *, timeout: Timeout) -> None:
        pass

    def clear(self, *, timeout: Timeout) -> Parked | None:
        return None


def _tune(
    tmp_path: Path, turns: DeviceTurns, *, reference_runs: int = 2
) -> tuple[Tuner, FakeGpuArms, FakeGpu]:
    tmp_path.mkdir(exist_ok=True)
    gpu = FakeGpu(CAPACITY)
    plan = MeasurePlan(min_chunk_s=0.0, parity_steps=8, warmup_steps=2, rounds=8)
    source = FakeGpuArms(gpu, plan, turns)
    tuner = Tuner(
        SessionSpec("job", {}, device="cuda"),
        TuneSettings(plan=plan, budget_s=600, reference_runs=reference_runs),
        Study(f"sqlite:///{tmp_path / 'study.db'}"),
        arms=source,
    )
    space = [KnobSpec("fast", (False, True), "exact", False)]
    try:
        climb(tuner, LadderPlan(space=space, max_batch=MAX_BATCH, prior=(), confirm=False))
    finally:
        tuner.close()
    return tuner, source, gpu


def test_a_60_percent_job_is_tuned_without_an_out_of_memory_trial(tmp_path: Path) -> None:
    tuner, source, gpu = _tune(tmp_path, DeviceTurns())
    story = [(t.kind, t.change, t.outcome, t.reason) for t in tuner.trials]
    assert gpu.ooms == 0, story
    assert all(t.outcome is not Outcome.OUT_OF_MEMORY for t in tuner.trials), story
    # The study did its work: the knob kept, the batch doubled up to the largest that fits.
    assert tuner.best_recipe == {"fast": True, "batch_size": MAX_BATCH}, story
    assert [t.kind for t in tuner.trials if t.kind == "batch"] == ["batch", "batch"], story
    # Arms were parked, and what was parked was the trained state: the weights, gradients
    # and momentum, 50% of the device (what a step's activations leave behind is cached,
    # and handed back by the same park).
    parks = [p for w in source.workers for p in w.parks if p.moved_bytes]
    assert parks, story
    state = JOB["state_share"] * CAPACITY
    assert all(0.95 * state <= p.moved_bytes <= state for p in parks)
    # Switching was measured apart from the steps and recorded with the trials.
    assert all(t.device_switch_s for t in tuner.trials if t.kind == "ladder"), story


def test_without_turns_the_same_job_runs_out_of_memory(tmp_path: Path) -> None:
    """The control: the same fake device and job, nothing parked (the tuner as it was).

    The quality reference beside the baseline runs out of memory, so the tune cannot start;
    without references, every candidate does, and the batch search finds false edges down to
    a batch of 36 (the job alone fits 128)."""

    def no_parking(self: SessionHost, *, park: bool) -> Parked:
        return Parked()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SessionHost, "_move", no_parking)
        with pytest.raises(TuneError, match="oom"):
            _tune(tmp_path / "a", NoTurns())
        tuner, _, gpu = _tune(tmp_path / "b", NoTurns(), reference_runs=0)
    tried = [t for t in tuner.trials if t.kind != "baseline"]
    assert next(t.change for t in tried if t.kind == "batch") == {"batch_size": 64}
    assert tried and all(t.outcome is Outcome.OUT_OF_MEMORY for t in tried)
    assert gpu.ooms == len(tried)


class LoggedWorker:
    """Answers park and unpark (pinned: never moves), logging each request by name."""

    def __init__(self, name: str, log: list[str], *, pinned: str | None = None) -> None:
        self.name, self.log, self.pinned = name, log, pinned

    def request(self, message: Request[ReplyT], *, timeout_s: float) -> ReplyT:
        self.log.append(f"{type(message).__name__.lower()} {self.name}")
        moved = 0 if self.pinned else 100
        return message.expect(Parked(moved_bytes=moved, pinned=self.pinned))

    def close(self) -> None:
        self.log.append(f"close {self.name}")


def test_the_resident_arm_is_parked_and_the_next_unparked_and_a_pinned_one_stays() -> None:
    log: list[str] = []
    turns = DeviceTurns()

    def arm(name: str, pinned: str | None = None) -> Arm:
        a = Arm(recipe={}, worker=LoggedWorker(name, log, pinned=pinned), objective="throughput")
        a.turns = turns
        return a

    a, b, graphs = arm("a"), arm("b"), arm("graphs", pinned="CUDA graphs")
    timeout = lambda: 1.0  # noqa: E731
    turns.take(a, timeout=timeout)
    turns.take(a, timeout=timeout)  # already resident: nothing to switch
    turns.take(b, timeout=timeout)
    turns.take(a, timeout=timeout)
    assert log == ["park a", "park b", "unpark a"]
    assert a.switches == 2 and b.switches == 1 and a.switch_s > 0 and a.parked_bytes == 100
    log.clear()
    turns.take(graphs, timeout=timeout)
    turns.take(b, timeout=timeout)  # the graph arm cannot leave: b runs beside it
    assert log == ["park a", "park graphs", "unpark b"]
    assert turns.beside_pinned(b) == "CUDA graphs" and turns.beside_pinned(graphs) is None
    graphs.close()
    assert turns.beside_pinned(b) is None
    log.clear()
    b.close()  # a closed arm is never parked again
    turns.clear(timeout=timeout)
    assert log == ["close b"]


#: The private pool of the graph arm's captured graphs, as a share of the device.
GRAPH_POOL_SHARE = 0.05


def _graphs_trial(tmp_path: Path, sharing: SharingMode | None) -> tuple[Tuner, TrialResult]:
    """The baseline replays CUDA graphs (it cannot leave the GPU); one ladder trial."""
    gpu = FakeGpu(CAPACITY)
    plan = MeasurePlan(min_chunk_s=0.0, parity_steps=8, warmup_steps=2, rounds=8)
    job = {**JOB, "graphs_knob": "graphs", "graph_pool_share": GRAPH_POOL_SHARE}
    source = FakeGpuArms(gpu, plan, DeviceTurns(), job)
    tuner = Tuner(
        SessionSpec("job", {"graphs": True}, device="cuda"),
        TuneSettings(plan=plan, budget_s=600, reference_runs=0, device_sharing=sharing),
        Study(f"sqlite:///{tmp_path / 'study.db'}"),
        arms=source,
    )
    try:
        tuner.run_baseline()
        trial = tuner.try_change({"fast": True}, kind="ladder", safety="exact")
    finally:
        tuner.close()
    assert gpu.ooms == (trial.outcome is Outcome.OUT_OF_MEMORY)
    return tuner, trial


def test_an_arm_beside_a_pinned_one_that_runs_out_of_memory_says_why(tmp_path: Path) -> None:
    """Forced to interleave, a best arm replaying CUDA graphs cannot leave the GPU: the
    candidate beside it runs out of memory, and its trial says the memory was another arm's."""
    _, trial = _graphs_trial(tmp_path, "interleaved")
    assert trial.outcome is Outcome.OUT_OF_MEMORY
    assert "another arm stayed on the GPU beside it" in trial.reason
    assert "CUDA graphs" in trial.reason


def test_an_arm_that_cannot_be_parked_and_does_not_fit_twice_takes_turns(tmp_path: Path) -> None:
    """Left to decide, the same study measures that the graph arm's 50% stays on the device
    when parked, so a second process does not fit: its trial runs in turns, with a verdict."""
    tuner, trial = _graphs_trial(tmp_path, None)
    sharing = tuner.sharing
    assert sharing is not None and sharing.mode == "turns", sharing
    assert sharing.moved_bytes == 0  # its state and its graphs' pool both stay
    assert sharing.stayed_bytes >= (0.95 * JOB["state_share"] + GRAPH_POOL_SHARE) * CAPACITY
    assert trial.outcome is Outcome.KEPT, trial.reason
    assert trial.sharing_mode == "turns"


#: Jobs that hold 60% of the device in memory no optimizer steps, beside a small trained
#: model (5%) and a step's activations (5%): each fits alone (70%), not twice (130%), and
#: parking can move only the 5% the optimizer steps.
BALLAST_JOB = {**JOB, "state_share": 0.05, "workspace_share": 0.05, "ballast_share": 0.6}
FROZEN_JOB = {**JOB, "state_share": 0.05, "workspace_share": 0.05, "frozen_share": 0.6}


def _tune_held(
    tmp_path: Path, job: dict[str, Any], sharing: SharingMode | None = None
) -> tuple[Tuner, FakeGpu, ClimbOutcome]:
    gpu = FakeGpu(CAPACITY)
    plan = MeasurePlan(min_chunk_s=0.0, parity_steps=8, warmup_steps=2, rounds=8)
    source = FakeGpuArms(gpu, plan, DeviceTurns(), job)
    tuner = Tuner(
        SessionSpec("job", {}, device="cuda"),
        TuneSettings(
            plan=plan, budget_s=600, reference_runs=2, final_pairs=3, device_sharing=sharing
        ),
        Study(f"sqlite:///{tmp_path / 'study.db'}"),
        arms=source,
    )
    space = [KnobSpec("fast", (False, True), "exact", False)]
    try:
        outcome = climb(tuner, LadderPlan(space=space, search_batch=False, prior=()))
    finally:
        tuner.close()
    return tuner, gpu, outcome


@pytest.mark.parametrize("job", [BALLAST_JOB, FROZEN_JOB], ids=["plain_tensor", "frozen_base"])
def test_a_job_holding_60_percent_that_parking_cannot_move_is_tuned_in_turns(
    tmp_path: Path, job: dict[str, Any]
) -> None:
    """A plain tensor, or a frozen base model no optimizer owns, stays on the device when
    the arm is parked: the study measures that, runs its arms in turns (one process on
    the device at a time), and reaches its verdicts with no out-of-memory trial."""
    tuner, gpu, outcome = _tune_held(tmp_path, job)
    story = [(t.kind, t.outcome, t.reason) for t in tuner.trials]
    assert gpu.ooms == 0 and gpu.most_resident == 1, story
    sharing = tuner.sharing
    assert sharing is not None and sharing.mode == "turns", sharing
    # What the decision rests on: parking moved the trained 5% and 60% stayed.
    assert 0.9 * 0.05 * CAPACITY <= sharing.moved_bytes <= 0.05 * CAPACITY
    assert sharing.stayed_bytes >= 0.59 * CAPACITY
    assert sharing.peak_bytes >= 0.65 * CAPACITY and sharing.capacity_bytes == CAPACITY
    assert "fits alone, not twice" in sharing.reason
    # The quality yardstick was measured (each reference alone), the knob's trial decided
    # from pairs of whole runs, and the final A/B confirmed it in turns too.
    baseline = tuner.trials[0]
    assert baseline.outcome is Outcome.BASELINE and len(baseline.reference_losses) == 2
    ladder = [t for t in tuner.trials if getattr(t, "kind", None) == "ladder"]
    assert [t.outcome for t in ladder] == [Outcome.KEPT], story
    assert ladder[0].sharing_mode == "turns" and len(ladder[0].chunk_times_s) >= 3
    assert tuner.best_recipe == {"fast": True}
    confirmation = outcome.confirmation
    assert confirmation is not None and confirmation.outcome is Outcome.MEASURED, confirmation
    assert confirmation.speedup_ci is not None and confirmation.speedup_ci[0] > 1.0
    # A resumed study reads the decision back with the baseline it reuses.
    resumed = Tuner(
        SessionSpec("job", {}, device="cuda"),
        TuneSettings(plan=MeasurePlan(min_chunk_s=0.0, parity_steps=8, warmup_steps=2)),
        Study(f"sqlite:///{tmp_path / 'study.db'}"),
        arms=FakeGpuArms(FakeGpu(CAPACITY), MeasurePlan(), DeviceTurns(), job),
    )
    resumed.run_baseline()
    assert resumed.reused == 1 and resumed.sharing == sharing and resumed.in_turns


def test_forced_to_interleave_a_job_that_fits_once_runs_out_of_memory(tmp_path: Path) -> None:
    """The control: the same job with its arms forced to interleave (parking all they can,
    as the tuner did before it measured): the quality reference started beside the parked
    baseline runs out of memory, and the error says it was that second process."""
    with pytest.raises(TuneError) as failed:
        _tune_held(tmp_path, BALLAST_JOB, "interleaved")
    message = str(failed.value)
    assert "(oom)" in message and "a quality reference run of it" in message, message
    assert "beside the baseline's parked process" in message
    assert "the baseline recipe failed" not in message
    assert "take turns" in (failed.value.hint or "") and "batch" not in (failed.value.hint or "")


def test_without_a_decision_a_reference_that_runs_out_of_memory_sends_the_arms_into_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A device that reports no memory (no decision can be measured) interleaves; the
    reference that then runs out of memory beside the parked baseline sends the study
    into turns, and the tune goes on with its true reason."""
    real_park = SessionHost._move

    def blind(self: SessionHost, *, park: bool) -> Parked:
        return replace(real_park(self, park=park), total_bytes=0, free_bytes=0)

    monkeypatch.setattr(SessionHost, "_move", blind)
    tuner, gpu, _ = _tune_held(tmp_path, BALLAST_JOB)
    sharing = tuner.sharing
    assert sharing is not None and sharing.in_turns
    assert "fits the GPU alone, not twice" in sharing.reason
    assert "a quality reference ran out of memory beside it" in sharing.reason
    assert gpu.ooms == 1  # the reference's, and no trial's
    assert all(t.outcome is not Outcome.OUT_OF_MEMORY for t in tuner.trials)


def test_a_candidate_out_of_memory_beside_the_parked_best_is_measured_again_in_turns(
    tmp_path: Path,
) -> None:
    """A job with 30% in a plain tensor fits twice at its batch (two interleave), but the
    batch search's larger candidate does not fit beside the parked best (30% stays): its
    trial goes into turns and is measured alone, where it fits, instead of ending as an
    out-of-memory edge the job alone never had."""
    job = {**JOB, "state_share": 0.2, "ballast_share": 0.3, "workspace_share": 0.1}
    gpu = FakeGpu(CAPACITY)
    plan = MeasurePlan(min_chunk_s=0.0, parity_steps=8, warmup_steps=2, rounds=8)
    tuner = Tuner(
        SessionSpec("job", {}, device="cuda"),
        TuneSettings(plan=plan, budget_s=600, reference_runs=2),
        Study(f"sqlite:///{tmp_path / 'study.db'}"),
        arms=FakeGpuArms(gpu, plan, DeviceTurns(), job),
    )
    try:
        climb(tuner, LadderPlan(space=[], max_batch=MAX_BATCH, prior=(), confirm=False))
    finally:
        tuner.close()
    story = [(t.kind, t.change, t.outcome, t.sharing_mode, t.reason) for t in tuner.trials]
    batch = [t for t in tuner.trials if t.kind == "batch"]
    assert [t.change for t in batch] == [{"batch_size": 64}, {"batch_size": 128}], story
    assert [t.sharing_mode for t in batch] == ["interleaved", "turns"], story
    assert all(t.outcome is not Outcome.OUT_OF_MEMORY for t in tuner.trials), story
    # 0.2 + 0.3 + 0.4 of the device fits alone: the search reaches it.
    assert tuner.best_recipe == {"batch_size": MAX_BATCH}, story
    sharing = tuner.sharing
    assert sharing is not None and sharing.in_turns
    assert "a candidate ran out of memory beside the parked best" in sharing.reason
    assert gpu.ooms == 1  # that candidate's, beside the parked best; none since
