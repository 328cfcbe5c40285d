"""A torchrun job whose ranks disagree on the recipe is bad input whichever arm shows it: the
script's `ScriptError(ranks_disagree=True)` ends the worker with a `CollectError` (one line,
exit 2), not a failed trial; any other error of the script stays a `WorkerFailure`. The whole
path on a real 2-rank job is the study tests/integration/test_tune_fsdp.py."""

from __future__ import annotations

import pytest

from torchdoctor.collect._channel import ScriptError, ScriptReady
from torchdoctor.core.errors import CollectError, ExitCode
from torchdoctor.procs import ScriptWorker, WorkerFailure

LINE = "the ranks of the torchrun job disagree on the recipe: rank 0 has fsdp_prefetch=1 applied"


def test_ranks_that_disagree_end_the_command_not_the_trial() -> None:
    worker = ScriptWorker(["train.py"])
    with pytest.raises(CollectError) as caught:
        worker._expect(ScriptError(LINE, ended=True, ranks_disagree=True), ScriptReady)
    assert str(caught.value).startswith(LINE) and "\n" not in str(caught.value)
    assert caught.value.exit_code == ExitCode.ERROR


def test_any_other_script_error_is_a_failed_trial() -> None:
    worker = ScriptWorker(["train.py"])
    with pytest.raises(WorkerFailure):
        worker._expect(ScriptError("ValueError: no data", ended=True), ScriptReady)
