"""host_python_lines: the host spends the step in a few lines of the script's own Python.

Reads the line sampler's record (`Evidence.host_lines`, collected from the steady steps of an
instrumented script, every rank its own): the line with the most time outside every named
phase is where the `other` time goes, and the finding points at it, `file:line`, with its
callers. No knob moves Python out of a loop, so the prescription is the code change at that
line, handed back unmeasured.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from torchdoctor.core.hostlines import HostLine, HostLineProfile
from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import (
    LOW_SHARE,
    EvidenceValue,
    Finding,
    Prescription,
    make_finding,
)

RULE_ID: Final = "host_python_lines"
TITLE: Final = "The step's host time is in a few Python lines"

#: Share of step time one line must hold outside the named phases for the rule to fire: the
#: finding severities' own floor (`findings.LOW_SHARE`, ~1.03x, the smallest effect the tuner
#: can prove on a quiet machine).
MIN_LINE_SHARE: Final = LOW_SHARE
#: Lines named in the evidence besides the top one.
MORE_LINES: Final = 2
#: The fix (moving the work out of the step, doing it every N steps, vectorizing it) can
#: remove the line's time, so the bound is the limit 1/(1-f); the confidence stays moderate
#: because sampled shares carry binomial noise (line_sampler.SAMPLE_INTERVAL_S).
CONFIDENCE: Final = 0.7


def other_share(line: HostLine) -> float:
    """The line's share of step time outside every named phase."""
    return line.share * line.phases.get("other", 0.0)


def top_other_line(lines: HostLineProfile, skip: Collection[str] = ()) -> HostLine | None:
    """The line with the most time outside the phases, leaving out the sites in `skip`."""
    candidates = [h for h in lines.lines if h.site not in skip]
    best = max(candidates, key=other_share, default=None)
    return best if best is not None and other_share(best) > 0 else None


def _cap(ev: Evidence) -> float:
    """The most the lines can hold: the `other` phase less the sync calls made outside the
    phases, which are host_sync's time."""
    other = ev.phase("other")
    syncs = (ev.syncs.outside_phases_share if ev.syncs is not None else None) or 0.0
    return max(0.0, (1.0 if other is None else other) - syncs)


def line_evidence(line: HostLine, share: float) -> dict[str, EvidenceValue]:
    """The evidence keys every rule that names a line uses."""
    out: dict[str, EvidenceValue] = {
        "top_line": line.site,
        "top_line_function": line.function,
        "top_line_share": round(share, 4),
    }
    if line.callers:
        out["top_line_called_from"] = line.callers[0]
    return out


def check(ev: Evidence) -> Finding | None:
    lines = ev.host_lines
    if lines is None or not lines.enough:
        return None
    # A line that makes the script's sync calls is host_sync's finding, not this one's.
    sync_sites = set(ev.syncs.sites) if ev.syncs is not None else set()
    top = top_other_line(lines, sync_sites)
    if top is None:
        return None
    share = min(other_share(top), _cap(ev))
    if share < MIN_LINE_SHARE:
        return None
    evidence = line_evidence(top, share)
    evidence["sampled_steps"] = lines.steps
    evidence["samples"] = lines.samples
    others = sorted(
        (h for h in lines.lines if h is not top and h.site not in sync_sites),
        key=other_share,
        reverse=True,
    )
    for i, h in enumerate(others[:MORE_LINES], start=2):
        if other_share(h) >= MIN_LINE_SHARE:
            evidence[f"line_{i}"] = f"{h.site} ({other_share(h):.0%})"
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=(
            f"{share:.0%} of each step is spent outside the training phases at {top.site} "
            f"in {top.function}."
        ),
        bottleneck="other_host",
        share=share,
        evidence=evidence,
        prescription=Prescription(
            code_change=(
                f"move the work of {top.function} out of the training loop, run it every N "
                "steps, or replace its Python loop with tensor operations"
            ),
            site=top.site,
        ),
        confidence=CONFIDENCE,
    )
