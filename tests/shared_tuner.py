"""One tuner of a shared study, for the studies tier (tests/integration/test_shared_study.py).

``python tests/shared_tuner.py CONFIG OUT STORAGE_URL``: `tune()` over the simulated sessions
of `CONFIG` (tests/tune_sim.py) in the study at `STORAGE_URL`, which carries its password as a
team's command line might; then the report and the ``--json`` document, written as
`torchdoctor --json tune` writes them. The command line itself lands in the run folder's
manifest, so the test's password grep covers what a real `tune --storage` records.
"""

from __future__ import annotations

import sys
from pathlib import Path

from torchdoctor.cli.state import settings
from torchdoctor.cli.tune import finish_with_report
from torchdoctor.tune import StorageURL, TuneConfig, tune

if __name__ == "__main__":
    config = TuneConfig.read(Path(sys.argv[1]))
    settings.json = True
    result = tune(config=config, out=Path(sys.argv[2]), storage=StorageURL.parse(sys.argv[3]))
    finish_with_report(result)
