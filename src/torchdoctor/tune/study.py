"""The persistent study: every finished trial lives in an Optuna storage.

A study is an Optuna multi-objective study (maximize samples/s, minimize peak memory) in any
storage Optuna opens: a SQLite file in the run folder by default, or a database URL shared by
several tuning workers. A trial is written only once it has finished (``add_trial`` of a
complete or failed frozen trial, one transaction), with its `TrialResult` (or, for the final
A/B, its `Confirmation`) as the user attribute
``record`` and its deterministic ``key``. A tuner killed mid-trial therefore leaves no
half-written trial, and on resume the ladder replays: a step whose key is already stored is
read back instead of being run again.

A study shared by several tuners (`shared`: an explicit `--storage`) also has its steps
claimed, so that each runs in one tuner only (`torchdoctor.tune.claims`), and its storage
URL's password stays in memory (`torchdoctor.tune.storage`): the study names its storage by
the public form, in its errors too.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

from torchdoctor.core.errors import TuneError
from torchdoctor.tune.claims import (
    HEARTBEAT_S,
    KEY_ATTR,
    RECORD_ATTR,
    Claim,
    Claims,
    heartbeat_storage,
)
from torchdoctor.tune.records import Trial, trial_from_json_dict
from torchdoctor.tune.storage import StorageURL

#: Objectives of every study: throughput up, peak memory down (the joint search's Pareto axes).
DIRECTIONS: Final = ("maximize", "minimize")
STUDY_NAME: Final = "torchdoctor-tune"

#: Opens of a storage that another process may be creating at the same moment. Optuna creates
#: its schema on a storage's first open without a lock, so two processes opening a fresh
#: storage together collide: a table that "already exists", or a second alembic_version row
#: (16 of 20 rounds of two simultaneous opens of one fresh SQLite file; Optuna issue #1092 for
#: PostgreSQL, where its maintainers advise creating the schema before the workers start). The
#: process that lost finds the winner's schema on its next open.
OPEN_ATTEMPTS: Final = 5
#: Seconds before the next open, times the attempt number, with jitter so that losers spread.
OPEN_RETRY_S: Final = 0.05


def _optuna() -> Any:
    import optuna

    optuna.logging.set_verbosity(logging.WARNING)
    return optuna


def _open(storage: Any, study_name: str) -> Any:
    """The Optuna study in `storage` (a URL or an Optuna storage), created with its schema
    when it is not there yet."""
    study = _optuna().create_study(
        storage=storage,
        study_name=study_name,
        directions=list(DIRECTIONS),
        load_if_exists=True,
    )
    study.set_user_attr("torchdoctor", True)
    return study


def _backend(url: StorageURL, shared: bool, heartbeat_s: int) -> Any:
    """What Optuna opens: a shared study's storage with heartbeats, a database with the
    connection arguments its URL needs (`StorageURL.engine_kwargs`), else the URL."""
    kwargs = url.engine_kwargs()
    if shared:
        return heartbeat_storage(url.secret, heartbeat_s, kwargs or None)
    if kwargs:
        return _optuna().storages.RDBStorage(url.secret, engine_kwargs=kwargs)
    return url.secret


def _created_concurrently(exc: BaseException) -> bool:
    """Whether opening a storage failed because another process was creating it too: its
    schema's tables or rows were inserted between this process's check and its insert."""
    import sqlalchemy.exc

    if isinstance(exc, sqlalchemy.exc.IntegrityError):
        return True  # a unique row (alembic_version, the study's name or attribute) twice
    return isinstance(exc, sqlalchemy.exc.DBAPIError) and "already exists" in str(exc)


class Study:
    """A thin, typed facade over one Optuna study holding trial records (`records.Trial`).

    `shared`: other tuners run on this study at the same time; each step is claimed
    (`claim`) before it runs, and its record finishes the claim (`add`).
    """

    def __init__(
        self,
        storage: str | StorageURL,
        *,
        study_name: str = STUDY_NAME,
        shared: bool = False,
        heartbeat_s: int = HEARTBEAT_S,
    ) -> None:
        url = storage if isinstance(storage, StorageURL) else StorageURL.parse(storage)
        #: The storage as a record may name it: without its password.
        self.storage_url = url.public
        self._url = url
        self.shared = shared
        self._claims: Claims | None = None
        self._held: dict[str, Claim] = {}
        for attempt in range(1, OPEN_ATTEMPTS + 1):
            try:
                backend = _backend(url, shared, heartbeat_s)
                self._study = _open(backend, study_name)
                if shared:
                    self._claims = Claims(self._study, backend, heartbeat_s=heartbeat_s)
                break
            except Exception as exc:  # SQLAlchemy/Optuna raise many types for a bad URL or file
                if attempt < OPEN_ATTEMPTS and _created_concurrently(exc):
                    time.sleep(OPEN_RETRY_S * attempt * random.uniform(1.0, 2.0))
                    continue
                detail = str(exc).splitlines()[0] if str(exc) else ""
                raise TuneError(
                    url.redact(
                        f"cannot open the study storage {url.public!r}: "
                        f"{type(exc).__name__}: {detail}".rstrip(": ")
                    ),
                    hint="pass a database URL Optuna can open, e.g. sqlite:///path/to/study.db "
                    "or postgresql+psycopg://user@host/db (its password from PGPASSWORD)",
                ) from None

    def storage_failure(self, exc: BaseException) -> TuneError | None:
        """`exc` as one line naming the storage when the database failed mid-study (the
        server went away, the connection dropped); None for any other error."""
        import sqlalchemy.exc

        storage_errors = (sqlalchemy.exc.SQLAlchemyError, _optuna().exceptions.StorageInternalError)
        if not isinstance(exc, storage_errors):
            return None
        detail = str(exc).splitlines()[0] if str(exc) else ""
        return TuneError(
            self._url.redact(
                f"the study storage {self.storage_url!r} failed: {type(exc).__name__}: {detail}"
            ),
            hint="check the database server; --resume RUN_DIR continues the study",
        )

    @property
    def optuna_study(self) -> Any:
        return self._study

    def set_attr(self, name: str, value: Any) -> None:
        self._study.set_user_attr(name, value)

    def attr(self, name: str) -> Any:
        return self._study.user_attrs.get(name)

    def records(self) -> Iterator[Trial]:
        """Every finished trial's record, in the order they were stored."""
        for trial in self._study.get_trials(deepcopy=False):
            data = trial.user_attrs.get(RECORD_ATTR)
            if data is not None:
                yield trial_from_json_dict(data, source=f"trial {trial.number}")

    def completed(self) -> dict[str, Trial]:
        return {r.key: r for r in self.records()}

    def claim(self, key: str, *, expired: Callable[[], bool] | None = None) -> Trial | None:
        """In a shared study: the record of `key` when a tuner has stored it (waiting while
        one runs it, until `expired()`: `claims.WaitExpired`), else None and the step is
        this tuner's to run and `add` (or `release`). In a study of one tuner: always None."""
        if self._claims is None:
            return None
        taken = self._claims.take(key, expired=expired)
        if isinstance(taken, Claim):
            self._held[key] = taken
            return None
        return trial_from_json_dict(taken, source=f"the shared study's {key!r}")

    def release(self, key: str) -> None:
        """Give up the claim of `key` (its trial was not run to a record)."""
        claim = self._held.pop(key, None)
        if claim is not None and self._claims is not None:
            self._claims.release(claim)

    def add(self, result: Trial) -> None:
        """Store one finished trial atomically (complete with values, or failed)."""
        optuna = _optuna()
        state = optuna.trial.TrialState
        values = None
        if result.ok and result.samples_per_s is not None:
            values = [result.samples_per_s, float(result.peak_memory_bytes or 0)]
        attrs = {KEY_ATTR: result.key, RECORD_ATTR: result.to_json_dict()}
        claim = self._held.pop(result.key, None)
        # A claim failed under this tuner (its heartbeat went stale) keeps the record as a
        # trial of its own.
        if (
            claim is not None
            and self._claims is not None
            and self._claims.finish(claim, attrs, values)
        ):
            return
        frozen = optuna.trial.create_trial(
            state=state.COMPLETE if values is not None else state.FAIL,
            values=values,
            user_attrs=attrs,
        )
        self._study.add_trial(frozen)

    def close(self) -> None:
        """Release every claim still held (a tuner stopped by an error mid-step)."""
        for key in list(self._held):
            self.release(key)
