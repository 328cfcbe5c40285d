"""Per-record adapters: each reads one record's JSON form and returns part of the view.

`build_view` puts the parts together into the `ReportView` the renderers read.
"""

from __future__ import annotations

from pathlib import Path

from torchdoctor.core.rundir import display_path
from torchdoctor.report.adapters._access import text
from torchdoctor.report.adapters.analysis import roofline_section, timeline_section
from torchdoctor.report.adapters.diagnosis import findings, verdict_section
from torchdoctor.report.adapters.disturbance import disturbance_warnings
from torchdoctor.report.adapters.env import env_section
from torchdoctor.report.adapters.missing import missing_records
from torchdoctor.report.adapters.reproduce import reproduce_section
from torchdoctor.report.adapters.steps import step_section
from torchdoctor.report.adapters.tune import (
    ladder_section,
    loss_curves,
    pareto_points,
    trial_views,
)
from torchdoctor.report.load import RunRecords
from torchdoctor.report.model import Header, ReportView

__all__ = ["build_view"]


def _header(found: RunRecords) -> Header:
    m = found.manifest
    if m is None:
        return Header(
            title=f"torchdoctor report: {found.source.name}",
            kind="record",
            target=str(found.source),
            status="single record",
        )
    command = [str(a) for a in m.get("command") or []]
    return Header(
        title=f"torchdoctor {text(m, 'kind')}: {text(m, 'target')}",
        kind=text(m, "kind") or "",
        target=text(m, "target") or "",
        status=text(m, "status") or "unknown",
        created=text(m, "created"),
        finished=text(m, "finished"),
        error=text(m, "error"),
        command=" ".join(["torchdoctor", *command[1:]]) if command else None,
        torchdoctor_version=text(m, "torchdoctor_version"),
    )


def _shown(path: Path) -> str:
    shown = display_path(path)
    return str(path.resolve()) if shown.startswith("..") else shown


def build_view(found: RunRecords) -> ReportView:
    records = found.records
    env_parts = found.env
    if not env_parts and records.get("diagnosis", {}).get("ceilings"):
        # No env.json: the diagnosis carries the environment and ceilings it was judged by.
        diag = records["diagnosis"]
        env_parts = {"fingerprint": diag.get("environment") or {}, "ceilings": diag["ceilings"]}
    env = env_section(env_parts) if env_parts else None
    peak = env.peak_flops if env else {}
    bandwidth = env.mem_bandwidth_bytes_per_s if env else None
    diagnosis = records.get("diagnosis")
    analysis = records.get("analysis")
    tune = records.get("tune")
    present = set(records) | ({"env"} if found.env else set())
    if found.trials:
        present.add("trials")
    return ReportView(
        header=_header(found),
        verdict=verdict_section(diagnosis) if diagnosis else None,
        env=env,
        steps=step_section(records),
        timeline=timeline_section(analysis) if analysis else None,
        roofline=roofline_section(analysis, peak, bandwidth) if analysis else None,
        findings=findings(diagnosis) if diagnosis else None,
        ladder=ladder_section(tune) if tune else None,
        trials=trial_views(found.trials) if found.trials else None,
        pareto=pareto_points(tune) if tune else None,
        parity=loss_curves(found.trials) if found.trials else None,
        reproduce=reproduce_section(
            found.manifest, tune, _shown(found.source), found.recipe_snippet
        ),
        missing=missing_records(found.manifest, present),
        warnings=disturbance_warnings(records, found.env, found.trials),
    )
