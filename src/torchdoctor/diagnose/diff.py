"""`diff_inputs(a, b)`: what changed between two runs, two tuning results or two traces.

Per-step samples of each side are compared as two independent sets (`measure.shift_estimate`:
the Hodges-Lehmann shift and its Mann-Whitney interval): the step, each phase (the step
records' phases, or a trace's breakdown categories), each op and each kernel. A change is
called significant when its interval excludes no change and it moves at least
`MIN_STEP_SHARE` of side A's median step: per-step samples see the spread from step to step
within each run, not the spread between two processes of one job, which the practical margin
stands for. Findings are compared by rule: those that appeared, went away, or stayed. Two
tuning results are compared by their headlines, best recipes and verdicts.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, ClassVar, Final, Literal

from pydantic import Field

from torchdoctor.core.errors import UsageError
from torchdoctor.core.records import Record, SubRecord
from torchdoctor.diagnose.diff_sources import KIND_WORDS, DiffKind, DiffSide, read_side
from torchdoctor.measure import shift_estimate

#: Smallest move, as a share of side A's median step, that counts as a change. Two processes
#: of one recipe differ steadily by a few percent on the 2-core hosts (docs/DESIGN.md, "A win
#: is proven twice"; benchmarks/RESULTS.md), which no per-step interval covers; 5% is above
#: that spread and well above measure.DEFAULT_MIN_EFFECT's 2% within one process.
MIN_STEP_SHARE: Final = 0.05
#: Ops and kernels listed per side of the diff, the largest moves first.
TOP_MOVES: Final = 10
#: Confidence of every interval (the project's default, measure.compare_samples).
CONFIDENCE: Final = 0.95

Group = Literal["step", "phase", "op", "kernel", "throughput"]
FindingStatus = Literal["appeared", "went_away", "stayed"]


class Change(SubRecord):
    """One quantity on both sides: medians, the shift B - A, its interval and verdict."""

    group: Group
    name: str
    unit: str  # "s" per step, or "samples/s"
    a: float
    b: float
    shift: float
    ci: tuple[float, float] | None = None
    p_value: float | None = None
    n_a: int
    n_b: int
    share_of_step: float | None = None  # shift / A's median step (per-step quantities)
    significant: bool = False


class FindingChange(SubRecord):
    rule_id: str
    title: str
    status: FindingStatus
    share_a: float | None = None
    share_b: float | None = None


class RecipeChange(SubRecord):
    knob: str
    a: Any = None
    b: Any = None


class RunDiff(Record):
    """What `torchdoctor diff A B` found (also its `--json` output and the run folder's
    diff.json)."""

    schema_name: ClassVar[str] = "run_diff"

    kind: DiffKind
    a: str
    b: str
    verdict: str
    most_changed: str | None = None
    step: Change | None = None
    phases: list[Change] = Field(default_factory=list)
    phase_source: str = ""
    ops: list[Change] = Field(default_factory=list)
    kernels: list[Change] = Field(default_factory=list)
    throughput: list[Change] = Field(default_factory=list)
    findings: list[FindingChange] = Field(default_factory=list)
    primary: tuple[str | None, str | None] = (None, None)
    recipe: list[RecipeChange] = Field(default_factory=list)
    min_step_share: float = MIN_STEP_SHARE
    notes: list[str] = Field(default_factory=list)

    def _repr_html_(self) -> str:
        """What `torchdoctor diff` prints, in a notebook: the verdict and what moved."""
        from torchdoctor.core import notebook

        moved = notebook.table(
            ["", "A", "B", "change", "interval", "significant"],
            [
                (c.name, c.a, c.b, c.shift, c.ci or "none", c.significant)
                for c in [*([self.step] if self.step else []), *self.phases, *self.ops]
            ],
        )
        findings = [f"{f.rule_id} {f.status.replace('_', ' ')}" for f in self.findings]
        return notebook.facts(
            "What changed",
            [
                ("A", self.a),
                ("B", self.b),
                ("verdict", self.verdict),
                ("findings", ", ".join(findings) or "none"),
            ],
            moved,
        )

    @property
    def regressed(self) -> bool:
        """B is slower than A (what `torchdoctor diff` gates on: exit 1): its step
        significantly longer; or, where the step's own interval is too wide to say, the phases
        that changed significantly add up to a longer step; or a throughput significantly
        lower."""
        if self.step is not None and self.step.significant:
            slower = self.step.shift > 0
        else:
            slower = sum(c.shift for c in self.phases if c.significant) > 0
        return slower or any(c.significant and c.shift < 0 for c in self.throughput)

    @property
    def significant(self) -> list[Change]:
        every = [self.step, *self.phases, *self.ops, *self.kernels, *self.throughput]
        return [c for c in every if c is not None and c.significant]


def _change(
    group: Group, name: str, a: list[float], b: list[float], step_a: float | None, unit: str = "s"
) -> Change:
    est = shift_estimate(a, b, confidence=CONFIDENCE)
    share = est.shift / step_a if step_a else None
    big = share is not None and abs(share) >= MIN_STEP_SHARE
    if group == "throughput":
        big = est.a_median > 0 and abs(est.shift / est.a_median) >= MIN_STEP_SHARE
    return Change(
        group=group,
        name=name,
        unit=unit,
        a=est.a_median,
        b=est.b_median,
        shift=est.shift,
        ci=est.ci,
        p_value=est.p_value,
        n_a=est.n_a,
        n_b=est.n_b,
        share_of_step=share,
        significant=est.excludes_zero and big,
    )


def _named(
    group: Group,
    a: dict[str, list[float]],
    b: dict[str, list[float]],
    step_a: float | None,
    n: tuple[int, int],
) -> list[Change]:
    """Every name on either side (absent from a side: zero in each of its steps)."""
    out = []
    for name in sorted(set(a) | set(b)):
        xs = a.get(name) or [0.0] * n[0]
        ys = b.get(name) or [0.0] * n[1]
        if xs and ys and (any(xs) or any(ys)):  # zero on both sides: nothing to show
            out.append(_change(group, name, xs, ys, step_a))
    return out


def _steps_in(a: dict[str, list[float]], b: dict[str, list[float]]) -> tuple[int, int]:
    """How many profiled steps each side's per-name samples span (a run folder's trace holds
    fewer steps than its step records)."""
    return len(next(iter(a.values()))), len(next(iter(b.values())))


def _largest(changes: list[Change], top: int) -> list[Change]:
    return sorted(changes, key=lambda c: (-c.significant, -abs(c.shift), c.name))[:top]


def _findings(a: DiffSide, b: DiffSide) -> list[FindingChange]:
    out = []
    for rule in sorted(set(a.findings) | set(b.findings)):
        title = (b.findings.get(rule) or a.findings[rule])[0]
        fa, fb = a.findings.get(rule), b.findings.get(rule)
        status: FindingStatus = "stayed" if fa and fb else ("appeared" if fb else "went_away")
        out.append(
            FindingChange(
                rule_id=rule,
                title=title,
                status=status,
                share_a=fa[1] if fa else None,
                share_b=fb[1] if fb else None,
            )
        )
    return out


def _tune_parts(a: DiffSide, b: DiffSide) -> tuple[list[Change], list[RecipeChange], list[str]]:
    ta, tb = a.tune or {}, b.tune or {}
    notes: list[str] = []
    changes = []
    if a.confirm_rates and b.confirm_rates:
        changes.append(
            _change(
                "throughput", "best recipe", a.confirm_rates, b.confirm_rates, None, "samples/s"
            )
        )
    confirmed = bool(changes)
    for key, label in (("baseline_samples_per_s", "baseline"), ("best_samples_per_s", "best")):
        va, vb = ta.get(key), tb.get(key)
        if isinstance(va, int | float) and isinstance(vb, int | float):
            if label == "best" and confirmed:
                continue  # the best recipe's rates over fresh processes are shown instead
            changes.append(_change("throughput", label, [va], [vb], None, "samples/s"))
    if any(c.ci is None for c in changes):
        notes.append(
            "the tuning results hold one throughput each (no final A/B of fresh processes "
            "on both sides): their figures are shown without an interval"
        )
    ra, rb = ta.get("best_recipe") or {}, tb.get("best_recipe") or {}
    recipe = [
        RecipeChange(knob=k, a=ra.get(k), b=rb.get(k))
        for k in sorted(set(ra) | set(rb))
        if ra.get(k) != rb.get(k)
    ]
    sa, sb = ta.get("speedup"), tb.get("speedup")
    if isinstance(sa, int | float) and isinstance(sb, int | float):
        notes.append(f"headline speedup over each one's baseline: {sa:.2f}x, then {sb:.2f}x")
    return changes, recipe, notes


def _verdict(diff: RunDiff) -> str:
    moved = diff.significant
    lost = [f.rule_id for f in diff.findings if f.status == "went_away"]
    new = [f.rule_id for f in diff.findings if f.status == "appeared"]
    parts = []
    if diff.most_changed:
        top = next(c for c in moved if c.name == diff.most_changed)
        parts.append(f"{top.name} changed most ({_signed_ms(top)} per step)")
    elif moved:
        parts.append(f"{len(moved)} quantities changed significantly")
    else:
        parts.append("nothing changed significantly")
    if new:
        parts.append("new findings: " + ", ".join(new))
    if lost:
        parts.append("findings gone: " + ", ".join(lost))
    if diff.recipe:
        parts.append(f"best recipes differ in {len(diff.recipe)} knob(s)")
    return "; ".join(parts)


def _signed_ms(change: Change) -> str:
    return f"{change.shift * 1e3:+.1f} ms"


def diff_sides(a: DiffSide, b: DiffSide) -> RunDiff:
    """Compare two sides already read (`read_side`); the sides must be of one kind."""
    if a.kind != b.kind:
        raise UsageError(
            f"cannot diff {KIND_WORDS[a.kind]} ({a.path}) with {KIND_WORDS[b.kind]} ({b.path})",
            hint="pass two run folders, two tuning results or two traces",
        )
    notes: list[str] = []
    step_a = None
    step = None
    phases: list[Change] = []
    if a.steps_s and b.steps_s:
        median_a = statistics.median(a.steps_s)
        step_a = median_a if median_a > 0 else None
        step = _change("step", "step", a.steps_s, b.steps_s, step_a)
        if a.phase_source == b.phase_source:
            if a.phases and b.phases:
                phases = _named("phase", a.phases, b.phases, step_a, _steps_in(a.phases, b.phases))
        elif a.phases and b.phases:
            notes.append("one side's phases are step records', the other's a trace's: not compared")
    elif a.kind != "tune":
        notes.append("a side has no recorded steps: the step and its phases are not compared")
    if step is not None and min(step.n_a, step.n_b) < 4:
        notes.append("fewer than 4 steps on a side: differences are shown without an interval")
    ops = kernels = []
    if a.ops and b.ops and step_a is not None:
        ops = _largest(_named("op", a.ops, b.ops, step_a, _steps_in(a.ops, b.ops)), TOP_MOVES)
    if a.kernels and b.kernels and step_a is not None:
        kernels = _largest(
            _named("kernel", a.kernels, b.kernels, step_a, _steps_in(a.kernels, b.kernels)),
            TOP_MOVES,
        )
    throughput: list[Change] = []
    recipe: list[RecipeChange] = []
    if a.kind == "tune":
        throughput, recipe, tune_notes = _tune_parts(a, b)
        notes += tune_notes
    moved_phases = [c for c in phases if c.significant]
    most = max(moved_phases, key=lambda c: abs(c.shift), default=None)
    diff = RunDiff(
        kind=a.kind,
        a=a.path,
        b=b.path,
        verdict="",
        most_changed=most.name if most else None,
        step=step,
        phases=sorted(phases, key=lambda c: (-c.significant, -abs(c.shift), c.name)),
        phase_source=a.phase_source,
        ops=ops,
        kernels=kernels,
        throughput=throughput,
        findings=_findings(a, b),
        primary=(a.primary, b.primary),
        recipe=recipe,
        notes=notes,
    )
    return diff.model_copy(update={"verdict": _verdict(diff)})


def diff_inputs(a: str | Path, b: str | Path) -> RunDiff:
    """What changed from A to B: two run folders, two tuning results or two traces.

    Raises `UsageError` (exit 2) for a missing path or two inputs of different kinds, and
    `RecordError`/`TraceError` for an input that cannot be read.
    """
    side_a = read_side(Path(a))
    side_b = read_side(Path(b))
    return diff_sides(side_a, side_b)
