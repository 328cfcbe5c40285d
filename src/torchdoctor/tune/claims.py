"""Ladder steps claimed by one tuner of a shared study, with Optuna's own machinery.

Several tuners on one study (`tune --storage URL`, one machine or several) walk the same
ladder: a step's key (kind, best recipe, candidate) is the same in each, and the next step
depends on this one's outcome. So the step is run by the first tuner to claim it, and the
others wait for its record and replay it (`Tuner.run_or_replay`): no trial runs twice, and
every tuner's study holds every result.

A claim is an Optuna trial holding the step's key as a user attribute:

1. A tuner that finds no trial for the key enqueues one (`Study.enqueue_trial`, state
   WAITING). Two tuners may enqueue at once, so the claim of a key is always its
   *lowest-numbered* trial that is WAITING or RUNNING: Optuna numbers a new trial under a
   lock on the study's row, so trials commit in number order and every tuner agrees on which
   one is lowest.
2. The tuner moves that trial from WAITING to RUNNING: `set_trial_state_values`, which locks
   the trial's row and refuses unless it is still WAITING (what `Study.ask` does to pop an
   enqueued trial). Exactly one tuner wins; the rest wait.
3. The owner records Optuna heartbeats while it runs the step (`RDBStorage` with
   ``heartbeat_interval``). A tuner killed with SIGKILL stops beating; a waiting tuner calls
   `optuna.storages.fail_stale_trials`, which marks the trial FAIL and runs the storage's
   `RetryFailedTrialCallback`: a WAITING copy with the same key, claimed as in 2. Its
   ``retry_history`` says which attempts were lost.
4. The owner stores the record on its trial and finishes it (COMPLETE with the objectives, or
   FAIL for a failed recipe); later duplicates of the key are withdrawn (FAIL, with
   `END_ATTR`), and so is a claim its owner gives up without a record (the budget ran out).

A step lost more than `MAX_RETRY` times (a recipe that kills its tuner's machine) stops the
tuner with an error rather than loop.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from torchdoctor.core.errors import TuneError

_log = logging.getLogger(__name__)

KEY_ATTR: Final = "key"
RECORD_ATTR: Final = "record"
#: Why a claim ended without a record: "withdrawn" (a duplicate) or "released" (given up).
END_ATTR: Final = "claim_end"

#: Seconds between heartbeats of a claimed step. Optuna's docs show 60 s for trials of
#: minutes; a ladder step of ours takes seconds to minutes, and a retry waits a grace period
#: of `GRACE_BEATS` beats, so a shorter beat loses less of a killed tuner's time.
HEARTBEAT_S: Final = 10
#: A claim is stale after this many missed beats (Optuna's own default grace is 2 beats; one
#: more tolerates a beat delayed by a loaded database or a busy interpreter).
GRACE_BEATS: Final = 3
#: How often a tuner waiting on another's step looks at the study again.
POLL_S: Final = 0.5
#: Retries of a lost step (`RetryFailedTrialCallback(max_retry=...)`) before the tuner gives up.
MAX_RETRY: Final = 3


def heartbeat_storage(
    url: str, heartbeat_s: int, engine_kwargs: dict[str, Any] | None = None
) -> Any:
    """An Optuna `RDBStorage` of `url` whose running trials beat, and are retried when stale
    (`engine_kwargs`: SQLAlchemy's, e.g. the connection's `require_auth`)."""
    import optuna

    storages = optuna.storages
    with _quiet_optuna():
        # Optuna 4.9 renamed the retry callback and its argument; older releases have the first.
        retry = getattr(storages, "RetryHeartbeatStaleTrialCallback", None)
        if retry is not None:
            callback = {"heartbeat_stale_trial_callback": retry(max_retry=MAX_RETRY)}
        else:
            callback = {"failed_trial_callback": storages.RetryFailedTrialCallback(MAX_RETRY)}
        return storages.RDBStorage(
            url,
            engine_kwargs=engine_kwargs,
            heartbeat_interval=heartbeat_s,
            grace_period=GRACE_BEATS * heartbeat_s,
            **callback,
        )


@contextlib.contextmanager
def _quiet_optuna() -> Iterator[None]:
    """Optuna's heartbeat API still warns that it is experimental: said once here, not on
    every tuner's stderr."""
    from optuna.exceptions import ExperimentalWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        yield


def _retry_of(lost: list[int]) -> dict[str, Any]:
    """The system attributes `RetryFailedTrialCallback` gives a retry of these lost trials."""
    return {"failed_trial": lost[-1], "retry_history": list(lost)}


class WaitExpired(Exception):
    """The tuner's own time ran out while another tuner ran the step it waits for."""


@dataclass
class Claim:
    """A step this tuner owns: its trial, beating until `stop`."""

    key: str
    trial_id: int
    number: int
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _beat(storage: Any, trial_id: int) -> None:
    try:
        storage.record_heartbeat(trial_id)
    except Exception as exc:  # a lost beat is a later one's job; a dead database is the study's
        _log.debug("heartbeat of trial %s failed: %s", trial_id, type(exc).__name__)


class Claims:
    """The claims of one tuner on a study: `take` a step, then `finish` or `release` it."""

    def __init__(
        self,
        study: Any,
        storage: Any,
        *,
        heartbeat_s: int = HEARTBEAT_S,
        poll_s: float = POLL_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._study = study
        self._storage = storage
        self._study_id = storage.get_study_id_from_name(study.study_name)
        self._heartbeat_s = heartbeat_s
        self._poll_s = poll_s
        self._sleep = sleep
        #: Numbers of the trials of other tuners' steps this tuner waited on.
        self.waited: set[int] = set()

    def _trials_of(self, key: str) -> list[Any]:
        trials = self._storage.get_all_trials(self._study_id, deepcopy=False)
        return sorted(
            (t for t in trials if t.user_attrs.get(KEY_ATTR) == key), key=lambda t: t.number
        )

    def take(
        self, key: str, *, expired: Callable[[], bool] | None = None
    ) -> Claim | dict[str, Any]:
        """The stored record of `key` (a dict), once some tuner has stored it; else a claim
        this tuner now owns. Blocks while another tuner runs the step, until `expired()`
        (`WaitExpired`)."""
        from optuna.storages import fail_stale_trials
        from optuna.trial import TrialState

        while True:
            trials = self._trials_of(key)
            recorded = [t for t in trials if RECORD_ATTR in t.user_attrs]
            if recorded:
                self._withdraw(t for t in trials if t.state == TrialState.WAITING)
                return dict(recorded[0].user_attrs[RECORD_ATTR])
            live = [t for t in trials if t.state in (TrialState.WAITING, TrialState.RUNNING)]
            lost = [
                t.number
                for t in trials
                if t.state == TrialState.FAIL and END_ATTR not in t.user_attrs
            ]
            if not live:
                if len(lost) > MAX_RETRY:
                    raise TuneError(
                        f"the ladder step {key!r} was lost {len(lost)} times: the tuners that "
                        "ran it stopped without a result (killed, or their machine went down)",
                        hint="run that recipe alone (`torchdoctor run --set ...`) to see why",
                    )
                self._enqueue(key, lost)
                continue
            first = live[0]
            if first.state == TrialState.WAITING:
                claim = self._try_claim(key, first, lost)
                if claim is not None:
                    return claim
                continue
            self.waited.add(first.number)
            if expired is not None and expired():
                raise WaitExpired(key)
            with _quiet_optuna():  # a killed owner's step: FAIL, and a WAITING retry
                fail_stale_trials(self._study)
            self._sleep(self._poll_s)

    def _enqueue(self, key: str, lost: list[int]) -> None:
        """A WAITING trial for `key`. After a lost attempt it is the retry that Optuna's retry
        callback adds (the same attributes), which it may add too, a moment later, when it
        runs after the tuner that failed the stale trial: the lower of the two is the claim."""
        if not lost:
            self._study.enqueue_trial({}, user_attrs={KEY_ATTR: key})
            return
        import optuna

        self._study.add_trial(
            optuna.trial.create_trial(
                state=optuna.trial.TrialState.WAITING,
                user_attrs={KEY_ATTR: key},
                system_attrs=_retry_of(lost),
            )
        )

    def _try_claim(self, key: str, trial: Any, lost: list[int]) -> Claim | None:
        """`trial` taken, or None when another tuner took it first. A claim that follows lost
        attempts names them as Optuna's retries do, whichever tuner enqueued it."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        # Beat before taking it: a tuner killed between the two still leaves a trial that
        # goes stale (Optuna never fails a running trial that has no heartbeat at all).
        _beat(self._storage, trial._trial_id)
        try:
            won = self._storage.set_trial_state_values(trial._trial_id, state=TrialState.RUNNING)
        except UpdateFinishedTrialError:
            won = False
        if not won:
            return None
        if lost and "retry_history" not in trial.system_attrs:
            for name, value in _retry_of(lost).items():
                self._storage.set_trial_system_attr(trial._trial_id, name, value)
        claim = Claim(key, trial._trial_id, trial.number)
        thread = threading.Thread(
            target=self._beat_until_stopped, args=(claim,), name="study-heartbeat", daemon=True
        )
        claim._thread = thread
        thread.start()
        return claim

    def _beat_until_stopped(self, claim: Claim) -> None:
        while not claim._stop.wait(self._heartbeat_s):
            _beat(self._storage, claim.trial_id)

    def finish(self, claim: Claim, user_attrs: dict[str, Any], values: list[float] | None) -> bool:
        """Store `user_attrs` on the claim's trial and finish it (COMPLETE with `values`, or
        FAIL). False when the trial was failed under this tuner (its heartbeat went stale):
        the caller stores the record another way."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        try:
            for name, value in user_attrs.items():
                self._storage.set_trial_user_attr(claim.trial_id, name, value)
            state = TrialState.COMPLETE if values is not None else TrialState.FAIL
            self._storage.set_trial_state_values(claim.trial_id, state=state, values=values)
        except UpdateFinishedTrialError:
            return False
        finally:
            claim.stop()
        # The key's later duplicates (enqueued by a tuner that then died, or not yet withdrawn
        # by one that reads the record in `take`) end with the step.
        self._withdraw(t for t in self._trials_of(claim.key) if t.state == TrialState.WAITING)
        return True

    def release(self, claim: Claim) -> None:
        """Give a claim up without a record: another tuner (or a resumed one) may run it."""
        self._end(claim.trial_id, "released")
        claim.stop()

    def _withdraw(self, trials: Any) -> None:
        for trial in trials:
            self._end(trial._trial_id, "withdrawn")

    def _end(self, trial_id: int, why: str) -> None:
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        with contextlib.suppress(UpdateFinishedTrialError):  # another tuner ended it first
            self._storage.set_trial_user_attr(trial_id, END_ATTR, why)
            self._storage.set_trial_state_values(trial_id, state=TrialState.FAIL)
