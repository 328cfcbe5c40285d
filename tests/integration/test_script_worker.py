"""ScriptWorker end to end: real scripts from the zoo driven like workload workers (CPU)."""

from __future__ import annotations

import math
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from torchdoctor.procs import (
    FailureKind,
    Park,
    Parked,
    Prepare,
    Reference,
    Run,
    ScriptWorker,
    Unpark,
    WorkerFailure,
)
from torchdoctor.tune.arms import Arm, MeasurePlan, interleave, paired_speedup, warm_arm
from torchdoctor.tune.sources import not_applied_of

ZOO = Path(__file__).resolve().parents[1] / "zoo"
#: control_well_tuned.py steps a fused torch.optim SGD every step (a pre-batched MLP).
CONTROL = str(ZOO / "control_well_tuned.py")
#: Generous per-request deadline: a launch imports torch (seconds on a loaded 2-core host).
TIMEOUT_S = 120.0

pytestmark = pytest.mark.slow


def deadline() -> float:
    return TIMEOUT_S


def script_arm(worker: ScriptWorker, plan: MeasurePlan) -> Arm:
    prepare_s = worker.request(Prepare(), timeout_s=TIMEOUT_S).prepare_s
    arm = Arm(recipe={}, worker=worker, objective="throughput", prepare_s=prepare_s)
    return warm_arm(arm, plan, timeout=deadline)


def test_two_script_arms_interleave_into_paired_chunks() -> None:
    plan = MeasurePlan(
        warmup_steps=2, chunk_steps=2, min_chunk_s=0.0, rounds=4, min_rounds=4, settle_rounds=1
    )
    workers = [ScriptWorker([CONTROL, "--steps", "1000"], seed=0) for _ in range(2)]
    try:
        best, candidate = (script_arm(w, plan) for w in workers)
        interleave(best, candidate, plan, timeout=deadline)
        for arm in (best, candidate):
            assert len(arm.chunk_scores) == plan.rounds
            assert all(s > 0 for s in arm.chunk_scores)
            assert arm.prepare_s > 0 and arm.compile_s > 0
            assert arm.losses and all(v is not None and math.isfinite(v) for v in arm.losses)
        # The same script seeded alike: the same loss trajectory in both arms (warm-up may
        # run one arm longer until its step times settle: compare what both ran).
        common = min(len(best.losses), len(candidate.losses))
        assert best.losses[:common] == candidate.losses[:common]
        est = paired_speedup(best, candidate, confidence=0.95)
        assert est.ci_low <= est.speedup <= est.ci_high
        assert est.ci_low > 0 and math.isfinite(est.ci_high)
        assert [w.record().restarts for w in workers] == [0, 0]
        # A script on a CPU answers a park with nothing moved (only a GPU's arms take
        # turns), and its next chunk runs on.
        for message in (Park(), Unpark()):
            assert best.worker.request(message, timeout_s=TIMEOUT_S) == Parked()
        assert len(best.worker.request(Run(2), timeout_s=TIMEOUT_S).steps) == 2
    finally:
        for w in workers:
            w.close()


def test_script_ending_before_the_chunk_is_restarted() -> None:
    worker = ScriptWorker([CONTROL, "--steps", "7"])
    try:
        reply = worker.request(Run(9), timeout_s=TIMEOUT_S)
        # 7 steps a run, the first two of each are start-up: 5 rows, a restart, 4 more rows.
        assert len(reply.steps) == 9
        assert reply.restarts == 1 and len(reply.restart_s) == 1
        assert reply.startup_s is not None and reply.startup_s > 0 and reply.restart_s[0] > 0
        losses = [row.loss for row in reply.steps]
        # The restarted run starts the trajectory over (the script seeds itself with 0).
        assert losses[5:9] == losses[0:4]
        record = worker.record()
        assert (record.launches, record.restarts, record.seeded_by) == (2, 1, "script")
    finally:
        worker.close()


def test_close_leaves_no_dataloader_worker_behind() -> None:
    worker = ScriptWorker([str(ZOO / "compute_workers.py"), "--steps", "1000", "--batch-size", "8"])
    try:
        worker.request(Run(2), timeout_s=TIMEOUT_S)
        launch = worker._launch
        assert launch is not None
        family = [psutil.Process(launch.proc.pid), *psutil.Process(launch.proc.pid).children(True)]
        assert len(family) >= 3  # the script and its two DataLoader workers
    finally:
        worker.close()
    _gone, alive = psutil.wait_procs(family, timeout=5)
    assert alive == []


def test_script_without_an_optimizer_is_driven_at_its_backward_calls() -> None:
    # Hand-written SGD, no torch.optim: each backward() return is a step boundary.
    worker = ScriptWorker([str(ZOO / "framework_overhead_manual_sgd.py"), "10"])
    try:
        worker.request(Prepare(), timeout_s=TIMEOUT_S)
        reply = worker.request(Run(4), timeout_s=TIMEOUT_S)
        rows = reply.steps
        assert len(rows) == 4 and reply.restarts == 0
        assert all(r[0] > 0 and r[2] is not None and math.isfinite(r[2]) for r in rows)
        # The hand-written update runs between the rows: the loss goes down step by step.
        assert [r[2] for r in rows] == sorted((r[2] for r in rows), reverse=True)
    finally:
        worker.close()


ZERO_GRAD_AFTER_STEP = str(Path(__file__).resolve().parents[1] / "scripts/zero_grad_after_step.py")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # nanoGPT's order: the first zero_grad comes after the first optimizer step.
        ([], {}),
        (["--no-zero-grad"], {"set_to_none": "the script never called zero_grad"}),
    ],
)
def test_set_to_none_is_judged_after_a_whole_iteration(
    args: list[str], expected: dict[str, str]
) -> None:
    worker = ScriptWorker([ZERO_GRAD_AFTER_STEP, *args], recipe={"set_to_none": False})
    try:
        reply = worker.request(Prepare(), timeout_s=TIMEOUT_S)
    finally:
        worker.close()
    # What ScriptArms reads to end a trial as "does not apply" without an A/B.
    assert not_applied_of(reply.injection) == expected


def test_loader_workers_do_not_act_in_a_script_without_a_dataloader() -> None:
    # The well-tuned control feeds pre-batched tensors: the injection says num_workers did
    # not act, and the tuner ends its trial as "does not apply" (tests/unit/tune).
    worker = ScriptWorker([CONTROL, "--steps", "20"], recipe={"num_workers": 2})
    try:
        reply = worker.request(Prepare(), timeout_s=TIMEOUT_S)
    finally:
        worker.close()
    assert not_applied_of(reply.injection) == {
        "num_workers": "the script built no torch DataLoader"
    }


def test_script_failing_before_its_first_step_quotes_its_error(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("import torch\nraise ValueError('no data at /data/train')\n")
    worker = ScriptWorker([str(script)])
    with pytest.raises(WorkerFailure) as info:
        worker.request(Run(2), timeout_s=TIMEOUT_S)
    assert info.value.kind is FailureKind.ERROR
    assert "ValueError: no data at /data/train" in info.value.reason
    worker.close()


def test_script_that_never_reaches_a_step_times_out(tmp_path: Path) -> None:
    script = tmp_path / "stuck.py"
    script.write_text(
        textwrap.dedent(
            """
            import time
            print("loading the dataset", flush=True)
            time.sleep(600)
            """
        )
    )
    worker = ScriptWorker([str(script)])
    start = time.monotonic()
    with pytest.raises(WorkerFailure) as info:
        worker.request(Prepare(), timeout_s=8)
    assert info.value.kind is FailureKind.TIMEOUT
    assert "optimizer steps" in info.value.reason and "loading the dataset" in info.value.reason
    # closed on failure: the stuck process is gone, not waited out
    assert time.monotonic() - start < 30
    assert worker._launch is None


def test_a_paused_scripts_dataloader_workers_are_stopped_until_its_next_chunk() -> None:
    # The paused arm's workers would otherwise decode batches during the other arm's chunk,
    # slowing it and handing this arm ready batches (ScriptWorker._freeze).
    script = str(ZOO / "data_loading_argparse.py")
    worker = ScriptWorker(
        [script, "--steps", "200", "--decode-iters", "200", "--workers", "2"], seed=0
    )
    try:
        first = worker.request(Run(3), timeout_s=deadline())
        assert len(first.steps) == 3
        children = list(worker._frozen)
        assert len(children) == 2  # the two DataLoader workers
        assert _statuses(children) == {psutil.STATUS_STOPPED}
        again = worker.request(Run(3), timeout_s=deadline())
        assert len(again.steps) == 3  # they ran again for the chunk
        assert len(worker._frozen) == 2
        assert _statuses(worker._frozen) == {psutil.STATUS_STOPPED}
    finally:
        worker.close()
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


def _statuses(procs: list[psutil.Process]) -> set[str]:
    """The processes' states once SIGSTOP has landed (it is delivered asynchronously)."""
    end = time.monotonic() + 2.0
    while True:
        states = {p.status() for p in procs}
        if states == {psutil.STATUS_STOPPED} or time.monotonic() > end:
            return states
        time.sleep(0.02)


def test_a_reference_request_is_a_fresh_perturbed_launch_beside_the_live_one() -> None:
    worker = ScriptWorker([CONTROL, "--steps", "1000"], seed=0)
    try:
        own = [row.loss for row in worker.request(Run(4), timeout_s=TIMEOUT_S).steps]
        reference = worker.request(Reference(1, 4), timeout_s=TIMEOUT_S).losses
        assert len(reference) == 4
        assert all(v is not None and math.isfinite(v) for v in reference)
        # Same script and seed, its weights nudged: another trajectory, not this launch's.
        assert list(reference) != own
        # The worker's own launch went on untouched by it.
        assert worker.record().launches == 1
        assert len(worker.request(Run(2), timeout_s=TIMEOUT_S).steps) == 2
    finally:
        worker.close()
