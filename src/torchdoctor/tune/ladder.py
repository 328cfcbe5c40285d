"""The ladder: from the baseline, one change at a time, keeping only proven wins.

Order: the baseline; then each knob (prescribed first, by the diagnosis's bound on gain, then
the static prior, see `torchdoctor.tune.space.order_knobs`) and each of its candidate values,
one change on top of the current best; then the batch-size search (throughput objective only:
a larger batch cannot lower the latency of a step); then a final A/B of the best against the
baseline in fresh process pairs.
Between the passes and the batch search, wins that each failed to reproduce in fresh processes
are tried together, alone and then with each change rejected for speed (`_stack_unproven`).

A candidate the knob catalogue says cannot run here (e.g. persistent_workers without workers,
CUDA-only knobs on a CPU) is skipped without a trial. On a script, a knob whose first candidate
did not act (the injection record says not_applied: no DataLoader for num_workers) ends that
trial without an A/B and its other values are not tried.

Every such decision goes by a trial's `Outcome` (`torchdoctor.tune.outcome`), never by the
words of its reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torchdoctor.collect import ALREADY_RUNS_WITH
from torchdoctor.tune.batch import search_batch_size
from torchdoctor.tune.budget import BudgetExhausted
from torchdoctor.tune.confirm import confirm_against_baseline
from torchdoctor.tune.outcome import Outcome
from torchdoctor.tune.parity import loosest
from torchdoctor.tune.records import Confirmation, TrialResult
from torchdoctor.tune.space import BATCH_KNOBS, STATIC_PRIOR, KnobSpec, order_knobs
from torchdoctor.tune.tuner import Tuner

Validator = Callable[[dict[str, Any]], str | None]


@dataclass(frozen=True)
class LadderPlan:
    space: Sequence[KnobSpec]
    prescribed: Sequence[str] = ()
    validate: Validator | None = None
    search_batch: bool = True
    #: Whether a knob's other values are tried once one is kept; without them a knob costs
    #: one trial where it wins, and the values left are said (`ClimbOutcome.not_tried`).
    values_after_keep: bool = True
    default_batch: int = 32
    max_batch: int = 4096
    hold_effective_batch: bool = False
    confirm: bool = True
    prior: Sequence[str] = STATIC_PRIOR
    #: knob -> the diagnosis's Amdahl bound on its gain (`space.order_knobs`)
    bounds: Mapping[str, float] = field(default_factory=dict)

    def order(self) -> list[KnobSpec]:
        """The knobs the ladder flips, in the order it tries them (the batch knobs go to the
        batch-size search)."""
        laddered = [s for s in self.space if s.name not in BATCH_KNOBS]
        return order_knobs(laddered, self.prescribed, self.prior, self.bounds)


@dataclass
class ClimbOutcome:
    budget_exhausted: bool = False
    #: The change whose trial the deadline cut before it decided, and how long it ran.
    cut: dict[str, Any] | None = None
    cut_after_s: float = 0.0
    confirmation: Confirmation | None = None
    #: Why -> the knobs skipped for that reason (in the order they came up).
    skipped: dict[str, list[str]] = field(default_factory=dict)
    #: Changes left untried because their knob had a value kept (`values_after_keep` off).
    not_tried: list[dict[str, Any]] = field(default_factory=list)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def candidate_changes(
    tuner: Tuner, spec: KnobSpec, validate: Validator | None, skipped: dict[str, list[str]]
) -> list[dict[str, Any]]:
    """The changes of one knob still worth a trial from the current best."""
    changes = []
    current = tuner.best_recipe.get(spec.name, tuner.own_settings.get(spec.name, spec.default))
    own = _found_own(tuner, spec.name)
    for value in spec.values:
        if _same(value, current) or any(_same(value, o) for o in own):
            continue
        change = spec.change(value)
        reason = validate({**tuner.best_recipe, **change}) if validate else None
        if reason is not None:
            knobs = skipped.setdefault(reason, [])
            if spec.name not in knobs:
                knobs.append(spec.name)
            continue
        changes.append(change)
    return changes


def _found_own(tuner: Tuner, name: str) -> list[Any]:
    """Values of knob `name` that a trial found the script already runs with (its injection
    said so at launch; its DDP or fully_shard settings are read no earlier): a later pass does
    not launch the script again to be told the same."""
    return [
        t.change[name]
        for t in tuner.trials
        if isinstance(t, TrialResult)
        and t.outcome is Outcome.NOT_APPLICABLE
        and list(t.change) == [name]
        and ALREADY_RUNS_WITH in t.reason
    ]


def planned_trials(plan: LadderPlan) -> int:
    """A rough count of the trials ahead (for "trial k of n" progress)."""
    n = 1 + sum(len(s.values) - 1 for s in plan.space if s.name not in BATCH_KNOBS)
    return n + (3 if plan.search_batch else 0) + (1 if plan.confirm else 0)


def _rejected_for_speed(result: TrialResult) -> bool:
    """A ladder rejection on speed alone (not quality, futility, a knob that did not act, or
    a failure): the kind a later change can turn into a win."""
    return result.kind == "ladder" and result.outcome.rejected_for_speed


def _speed_rejections(tuner: Tuner) -> list[tuple[str, Any, TrialResult]]:
    """(knob, value, trial) of every one-knob ladder change rejected for speed so far."""
    return [
        (*next(iter(t.change.items())), t)
        for t in tuner.trials
        if isinstance(t, TrialResult) and _rejected_for_speed(t) and len(t.change) == 1
    ]


#: Knobs interact (torch.compile can look slow with oversubscribed threads and fast once
#: threads=1 is kept), so a knob rejected as "not faster" before a later keep is tried once
#: more on a second pass from the new best, unless it lost alone by more than the keep gained
#: (`lost_beyond`). Quality and crash rejections are not retried.
MAX_LADDER_PASSES = 2


def _one_pass(
    tuner: Tuner, specs: Sequence[KnobSpec], plan: LadderPlan, outcome: ClimbOutcome
) -> list[KnobSpec]:
    """Try every knob once; return the knobs worth retrying: rejected for speed before a keep,
    unless they lost alone by more than the keep's gain could make up (`lost_beyond`)."""
    slow: list[tuple[KnobSpec, TrialResult]] = []
    retry: list[KnobSpec] = []
    for spec in specs:
        kept_here = False
        rejected_for_speed: TrialResult | None = None
        gain = 1.0
        # Re-derived per value: after a kept value the current best has changed.
        for change in candidate_changes(tuner, spec, plan.validate, outcome.skipped):
            current = tuner.best_recipe.get(
                spec.name, tuner.own_settings.get(spec.name, spec.default)
            )
            if _same(current, change[spec.name]):
                continue
            if kept_here and not plan.values_after_keep:
                outcome.not_tried.append(change)
                continue
            result = tuner.try_change(change, kind="ladder", safety=spec.safety)
            if result.outcome is Outcome.NOT_APPLICABLE:
                why = result.reason.split(": ", 2)[-1].split("; ")[0]
                if ALREADY_RUNS_WITH in why:
                    continue  # this value is the script's own: the knob's others still act
                # The knob cannot reach this script's code: its other values cannot either.
                # Reported once, with the injection's reason (after "knob=value: ").
                outcome.skipped.setdefault(why, []).append(spec.name)
                break
            if result.outcome is Outcome.KEPT:
                kept_here = True
                gain *= result.speedup_vs_best or 1.0
            # Quality and futility rejections are not retried: no later change turns a 10x
            # slowdown into a win, nor fixes a broken loss.
            if _rejected_for_speed(result) and (
                rejected_for_speed is None or _closer(result, rejected_for_speed)
            ):
                rejected_for_speed = result
        if kept_here:
            # What was rejected for speed so far deserves a second look from the new best,
            # but not a change slower alone than the keep's gain could make up.
            retry.extend(s for s, r in slow if not lost_beyond(r, gain))
            slow = []
        elif rejected_for_speed is not None:
            slow.append((spec, rejected_for_speed))
    return retry


def _closer(a: TrialResult, b: TrialResult) -> bool:
    """Whether rejection `a` came closer to a win than `b` (its interval reaches higher)."""
    high = (a.speedup_vs_best_ci or (0.0, 0.0))[1]
    return high > (b.speedup_vs_best_ci or (0.0, 0.0))[1]


def _unproven_wins(tuner: Tuner, by_name: dict[str, KnobSpec]) -> dict[str, Any]:
    """Knob -> value of each win that cleared its first pair of processes but not its second,
    one value per knob (the one whose first pair read fastest), not already in the best."""
    held: dict[str, TrialResult] = {}
    for name, value, t in _speed_rejections(tuner):
        if (
            t.outcome is not Outcome.NOT_REPRODUCED
            or name not in by_name
            or _same(tuner.best_recipe.get(name), value)
        ):
            continue
        other = held.get(name)
        if other is None or (t.speedup_vs_best or 0.0) > (other.speedup_vs_best or 0.0):
            held[name] = t
    return {name: t.change[name] for name, t in held.items()}


def _carry(tuner: Tuner, unproven: dict[str, Any]) -> float:
    """The gain the unproven wins' first pairs claimed together (the product of their
    speedups): what a stack of them could lend a change that lost alone."""
    claims: dict[str, float] = {}
    for name, value, t in _speed_rejections(tuner):
        if t.outcome is Outcome.NOT_REPRODUCED and _same(unproven.get(name), value):
            claims[name] = max(claims.get(name, 0.0), t.speedup_vs_best or 1.0)
    return math.prod(claims.values())


def lost_beyond(result: TrialResult, carry: float) -> bool:
    """Whether a change lost alone by more than `carry` could make up: its A/B's whole
    interval, times `carry`, below no change."""
    ci = result.speedup_vs_best_ci
    return ci is not None and ci[1] * carry < 1.0


def _stacks(
    tuner: Tuner, specs: Sequence[KnobSpec], unproven: dict[str, Any]
) -> list[dict[str, Any]]:
    """The stacks worth one trial each, in order: the unproven wins alone (two or more), then
    the unproven wins with each change rejected for speed on its own (knob order, one per
    knob and value).

    A change that lost alone is stacked only while the unproven wins' own claimed gain could
    carry it past no change (`lost_beyond`): bf16 on an eager model losing a few percent can
    pay on top of an unproven compile, but on a 2-core Xeon `tune cnn` spent its budget on
    combinations with changes each far slower alone and never reached its batch search.
    """
    stacks: list[dict[str, Any]] = [dict(unproven)] if len(unproven) >= 2 else []
    order = {s.name: i for i, s in enumerate(specs)}
    seen: list[tuple[str, Any]] = []
    carry = _carry(tuner, unproven)
    rejections = [
        r for r in _speed_rejections(tuner) if r[0] in order and not lost_beyond(r[2], carry)
    ]
    for name, value, _ in sorted(rejections, key=lambda r: order[r[0]]):
        if name in unproven or _same(tuner.best_recipe.get(name), value):
            continue
        if any(n == name and _same(v, value) for n, v in seen):
            continue
        seen.append((name, value))
        stacks.append({**unproven, name: value})
    return stacks


def _stack_unproven(tuner: Tuner, specs: Sequence[KnobSpec], plan: LadderPlan) -> list[KnobSpec]:
    """Try the wins that did not reproduce as one change, alone and then with each change
    rejected for speed, until one stack is kept; return the knobs worth retrying from it
    (empty unless one was kept).

    A win that cleared its first pair of processes but whose second pair could not tell it
    from no change is most often a real gain smaller than the spread between two processes
    of one recipe. Together such gains multiply, and a larger gain stands out from the same
    spread. And a change can pay only on top of one that was not proven alone: bf16 autocast
    can lose on an eager model and gain once it is compiled, so with compile unproven the
    ladder would never measure the pair (benchmarks/RESULTS.md, "Small wins are proven
    together", has the gpt workload's case). Each stack is one more ladder trial
    with the same two pairs of processes, so it is kept only when proven like any single
    change, and a stack that does not help is rejected like one. Once one is kept, the knobs
    rejected for speed are retried from it, as after any keep.
    """
    by_name = {s.name: s for s in specs}
    unproven = _unproven_wins(tuner, by_name)
    if not unproven:
        return []
    for change in _stacks(tuner, specs, unproven):
        if plan.validate is not None and plan.validate({**tuner.best_recipe, **change}):
            continue
        safety = loosest([by_name[name].safety for name in change])
        if tuner.try_change(change, kind="ladder", safety=safety).outcome is Outcome.KEPT:
            kept = {name for rung in tuner.rungs for name in rung.change}
            slow = {name for name, _, _ in _speed_rejections(tuner)}
            return [s for s in specs if s.name in slow - kept]
    return []


def climb(tuner: Tuner, plan: LadderPlan) -> ClimbOutcome:
    """Run the whole ladder on `tuner` (the baseline first). Stops cleanly on the budget."""
    outcome = ClimbOutcome()
    tuner.run_baseline()
    # Once a change is kept, ladder trials stop early enough to leave time for the final
    # confirmation, whose direct A/B is the headline (a chained product of step ratios is only
    # an estimate); while the best is the baseline nothing is held back (`Allowance.hold_reserve`).
    tuner.plan_confirmation(plan.confirm)
    try:
        specs = plan.order()
        this_pass = specs
        for _ in range(MAX_LADDER_PASSES):
            this_pass = _one_pass(tuner, this_pass, plan, outcome)
            if not this_pass:
                break
        retry = _stack_unproven(tuner, specs, plan)
        if retry:
            _one_pass(tuner, retry, plan, outcome)
        if plan.search_batch and tuner.settings.objective == "throughput":
            search_batch_size(
                tuner,
                default_batch=plan.default_batch,
                max_batch=plan.max_batch,
                hold_effective_batch=plan.hold_effective_batch,
            )
    except BudgetExhausted as exc:
        outcome.budget_exhausted = True
        outcome.cut, outcome.cut_after_s = exc.cut, exc.cut_after_s
    if plan.confirm and tuner.confirm_dropped is None:
        try:
            outcome.confirmation = confirm_against_baseline(tuner)
        except BudgetExhausted:
            outcome.budget_exhausted = True
    return outcome
