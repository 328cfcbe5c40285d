"""`log_to_mlflow(source, ...)`: torchdoctor's results as MLflow metrics.

The scalars `integrations/scalars.py` reads from a record or a run folder, logged in one batch
(`MlflowClient.log_batch`) with each scalar's step as MLflow's step, so a ladder's rungs and a
run's steps each draw their own curve. Logs into the run id given, or into a new run of
`experiment` that this call creates and ends. The tracking URI is MLflow's own (the
`MLFLOW_TRACKING_URI` environment, else its default) unless given: a local folder
(`file:./mlruns`) or a database needs no server (the `[mlflow]` extra brings the client).
"""

from __future__ import annotations

import time
from pathlib import Path

from torchdoctor.core.errors import UsageError
from torchdoctor.core.records import Record
from torchdoctor.integrations.scalars import scalars_of

#: The experiment a new run is created in when none is named.
DEFAULT_EXPERIMENT = "torchdoctor"
#: Metrics per `log_batch` call: MLflow's limit for one request (MAX_METRICS_PER_BATCH).
BATCH = 1000


def log_to_mlflow(
    source: Record | str | Path,
    *,
    run_id: str | None = None,
    tracking_uri: str | None = None,
    experiment: str = DEFAULT_EXPERIMENT,
    run_name: str | None = None,
) -> str:
    """Log the scalars of `source` (a record, or every record of a run folder) to MLflow.

    Into run `run_id` (left open) or a new run of `experiment` named `run_name` (ended).
    Returns the run's id.
    """
    try:
        from mlflow.entities import Metric
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise UsageError(
            "logging to MLflow needs the mlflow package (mlflow or mlflow-skinny)",
            hint="pip install 'torchdoctor[mlflow]'",
        ) from None
    written = scalars_of(source)
    client = MlflowClient(tracking_uri=tracking_uri)
    own = run_id is None
    if run_id is None:
        found = client.get_experiment_by_name(experiment)
        experiment_id = (
            found.experiment_id if found is not None else client.create_experiment(experiment)
        )
        run_id = client.create_run(experiment_id, run_name=run_name).info.run_id
    now_ms = int(time.time() * 1000)
    metrics = [Metric(tag, value, now_ms, step) for tag, value, step in written]
    try:
        for start in range(0, len(metrics), BATCH):
            client.log_batch(run_id, metrics=metrics[start : start + BATCH])
    finally:
        if own:
            client.set_terminated(run_id)
    return run_id


__all__ = ["DEFAULT_EXPERIMENT", "log_to_mlflow"]
