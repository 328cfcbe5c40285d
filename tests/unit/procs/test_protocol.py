"""One request/reply protocol for every worker: typed messages, typed failures.

A workload's session answered in this process (`InProcessWorker`) and in a spawned one
(`SubprocessWorker`) must give the same answers to the same requests; a reply that is not the
one asked for, or a failure, arrives as a `WorkerFailure` with its kind.
"""

from __future__ import annotations

import pickle

import pytest

from torchdoctor.procs import (
    Done,
    Exit,
    Failed,
    FailureKind,
    InProcessWorker,
    Losses,
    Prepare,
    Prepared,
    Ran,
    Reference,
    Release,
    Request,
    Run,
    SessionHost,
    SessionSpec,
    StepRow,
    WorkerFailure,
    WorkerLike,
    classify_exception,
    classify_reason,
    start_worker,
)
from tune_sim import SIMULATED_FACTORY

SPEC = SessionSpec("sim", {}, factory=SIMULATED_FACTORY, options={"base_step_s": 0.001})


def test_expect_gives_the_reply_a_request_asks_for() -> None:
    ran = Ran((StepRow(0.01, 8, 1.5),), peak_memory_bytes=10)
    assert Run(1).expect(ran) is ran
    assert Release().expect(Done()) == Done()


def test_a_failed_reply_raises_its_kind_and_reason() -> None:
    with pytest.raises(WorkerFailure) as info:
        Run(1).expect(Failed(FailureKind.OOM, "CUDA out of memory"))
    assert info.value.kind is FailureKind.OOM and info.value.reason == "CUDA out of memory"


def test_a_reply_of_another_request_is_an_error() -> None:
    with pytest.raises(WorkerFailure) as info:
        Run(1).expect(Losses((1.0,)))
    assert info.value.kind is FailureKind.ERROR
    assert "Run" in info.value.reason and "Losses" in info.value.reason


@pytest.mark.parametrize(
    "message",
    [
        Prepare(SPEC, memory_cap_bytes=1 << 30),
        Run(3, release=True),
        Release(),
        Reference(2, 5),
        Exit(),
        Prepared(0.5, startup_s=0.2, injection={"knobs": []}, loaders=({"num_workers": 2},)),
        Ran((StepRow(0.01, 8, None),), restarts=1, restart_s=(1.5,)),
        Losses((1.0, None)),
        Done(),
        Failed(FailureKind.TIMEOUT, "no answer within 8 s"),
    ],
)
def test_messages_cross_a_pipe_unchanged(message: object) -> None:
    assert pickle.loads(pickle.dumps(message)) == message


def test_the_failure_kinds_keep_the_words_stored_records_use() -> None:
    assert [k.value for k in FailureKind] == ["crash", "oom", "timeout", "nan", "error"]
    assert FailureKind("oom") is FailureKind.OOM and f"{FailureKind.CRASH}" == "crash"


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (MemoryError(), FailureKind.OOM),
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), FailureKind.OOM),
        (RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried"), FailureKind.OOM),
        (type("OutOfMemoryError", (RuntimeError,), {})("boom"), FailureKind.OOM),
        (ValueError("shapes do not match"), FailureKind.ERROR),
    ],
)
def test_an_exception_is_classified_as_out_of_memory_or_error(
    exc: BaseException, kind: FailureKind
) -> None:
    assert classify_exception(exc) is kind


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("OutOfMemoryError: CUDA out of memory. (train.py:12 in step)", FailureKind.OOM),
        ("MemoryError:  (train.py:3 in <module>)", FailureKind.OOM),
        ("RuntimeError: DefaultCPUAllocator: can't allocate memory (x.py:1)", FailureKind.OOM),
        ("ValueError: no data at /data/train (train.py:2 in <module>)", FailureKind.ERROR),
        ("", FailureKind.ERROR),
    ],
)
def test_a_reason_reported_as_text_is_classified_by_its_type_and_message(
    reason: str, kind: FailureKind
) -> None:
    assert classify_reason(reason) is kind


def test_the_host_fails_a_run_or_a_reference_before_prepare() -> None:
    host = SessionHost()
    assert host.handle(Run(1)) == Failed(FailureKind.ERROR, "run before prepare")
    assert host.handle(Reference(1, 2)) == Failed(FailureKind.ERROR, "reference before prepare")


def test_a_session_that_cannot_be_built_fails_prepare_with_its_exception() -> None:
    spec = SessionSpec("sim", {"big": True}, factory=SIMULATED_FACTORY,
                       options={"memory_limit_bytes": 1, "bytes_per_sample": 2})  # fmt: skip
    reply = SessionHost().handle(Prepare(spec))
    assert isinstance(reply, Failed) and reply.kind is FailureKind.OOM
    assert reply.reason.startswith("MemoryError: simulated allocation")


def _conversation(worker: WorkerLike) -> list[object]:
    """What a tuner's arm asks of a worker, in order; timings left out."""
    ran = worker.request(Run(3, release=True), timeout_s=60)
    assert all(row.total_s > 0 for row in ran.steps)
    losses = worker.request(Reference(1, 4), timeout_s=60)
    again = worker.request(Run(2), timeout_s=60)
    released = worker.request(Release(), timeout_s=60)
    return [
        [(row.samples, row.loss) for row in ran.steps],
        losses,
        [(row.samples, row.loss) for row in again.steps],
        released,
    ]


def test_a_worker_process_answers_as_the_in_process_worker_does() -> None:
    answers = []
    for isolate in (False, True):
        worker, prepare_s = start_worker(SPEC, isolate=isolate, timeout_s=60)
        try:
            assert prepare_s >= 0
            answers.append(_conversation(worker))
        finally:
            worker.close()
    in_process, spawned = answers
    assert spawned == in_process
    assert len(in_process[0]) == 3 and isinstance(in_process[1], Losses)


def test_a_request_type_the_worker_does_not_know_is_an_error() -> None:
    class Unknown(Request[Done]):
        reply_type = Done

    with pytest.raises(WorkerFailure) as info:
        InProcessWorker().request(Unknown(), timeout_s=1)
    assert info.value.kind is FailureKind.ERROR and "Unknown" in info.value.reason
