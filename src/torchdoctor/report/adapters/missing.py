"""Which records a run of each kind should hold, and what their absence means."""

from __future__ import annotations

from typing import Final

from torchdoctor.core import rundir
from torchdoctor.report.adapters._access import JsonDict, text
from torchdoctor.report.model import MissingRecord

#: Record key -> (file, the sections it feeds).
RECORD_SECTIONS: Final[dict[str, tuple[str, str]]] = {
    "env": (rundir.ENV, "environment and measured ceilings"),
    "diagnosis": (rundir.DIAGNOSIS, "verdict and findings"),
    "analysis": (rundir.ANALYSIS, "timeline summary and roofline"),
    "run_result": (rundir.RUN_RESULT, "step breakdown"),
    "tune": (rundir.TUNE, "ladder, Pareto front and best recipe"),
    "trials": (rundir.TRIALS + "/", "trial table and loss-parity curves"),
}

#: What each kind of run writes when it completes (see core/rundir.py).
EXPECTED: Final[dict[str, tuple[str, ...]]] = {
    "run": ("run_result",),
    "profile": ("analysis",),
    "analyze": ("analysis",),
    # env.json is optional: a diagnosis carries the environment and ceilings it used.
    "diagnose": ("diagnosis",),
    "tune": ("tune", "trials"),
    "demo": ("diagnosis", "tune", "trials"),
}


def _why(manifest: JsonDict) -> str:
    status = text(manifest, "status") or "unknown"
    if status == "running":
        return (
            "the run never finished (run.json still says 'running': it was killed, "
            "or is still going)"
        )
    if status == "failed":
        return f"the run failed: {text(manifest, 'error') or 'no reason recorded'}"
    return "the run completed without writing it"


def missing_records(manifest: JsonDict | None, present: set[str]) -> list[MissingRecord]:
    if manifest is None:
        return []
    expected = EXPECTED.get(text(manifest, "kind") or "", ())
    why = _why(manifest)
    return [
        MissingRecord(file=RECORD_SECTIONS[key][0], section=RECORD_SECTIONS[key][1], why=why)
        for key in expected
        if key not in present
    ]
