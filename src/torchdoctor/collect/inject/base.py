"""What injectors share: the site they patch through and the ledger of what each knob did."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from torchdoctor.collect.inject.record import MAX_APPLIED_AT, KnobOutcome, KnobStatus
from torchdoctor.collect.probes import ProbeSite
from torchdoctor.knobs import KnobValue

#: How a knob's not-applied reason begins its tail when the script's own call already passes
#: the recipe's value (`the script's fully_shard already runs with reshard_after_forward=True`):
#: that value alone is the script's, and the knob's other values still reach the call
#: (tune/ladder.py tries them).
ALREADY_RUNS_WITH = "already runs with"


@dataclass
class InjectSite(ProbeSite):
    """The probes' site (reversible patcher, hook handles) plus undo callbacks for settings
    that are not attributes (torch.set_num_threads, the float32 matmul precision)."""

    undo: list[Callable[[], None]] = field(default_factory=list)

    def remove(self) -> None:
        while self.undo:
            self.undo.pop()()
        super().remove()


@dataclass
class _Entry:
    value: KnobValue
    #: why the knob did not act if it never gets the chance (no DataLoader built, ...)
    unreached: str
    status: KnobStatus | None = None
    reason: str | None = None
    applied_at: list[str] = field(default_factory=list)
    applied_count: int = 0


class Ledger:
    """Per knob: where it acted and the first reason it could not; read into the record."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def expect(self, knob: str, value: KnobValue, unreached: str) -> None:
        """`knob` will try to act; `unreached` is the reason recorded if it never gets to."""
        self._entries[knob] = _Entry(value, unreached)

    def unchanged(self, knob: str, value: KnobValue) -> None:
        self._entries[knob] = _Entry(value, "", status="unchanged")

    def refuse(self, knob: str, value: KnobValue, reason: str) -> None:
        """The knob cannot act in this process at all (decided before the script runs)."""
        self._entries[knob] = _Entry(value, reason, status="not_applied", reason=reason)

    def applied(self, knob: str, where: str) -> None:
        entry = self._entries[knob]
        entry.status = "applied"
        entry.applied_count += 1
        if len(entry.applied_at) < MAX_APPLIED_AT:
            entry.applied_at.append(where)

    def unreached(self, knob: str, reason: str) -> None:
        """Why the knob did not act if it never does, as far as the script has run."""
        self._entries[knob].unreached = reason

    def skipped(self, knob: str, reason: str) -> None:
        """The knob could not act at one place; only the first reason is kept."""
        entry = self._entries[knob]
        if entry.reason is None:
            entry.reason = reason

    def active(self, knob: str) -> bool:
        """Whether `knob` is set to act (expected and not refused or unchanged)."""
        entry = self._entries.get(knob)
        return entry is not None and entry.status in (None, "applied")

    def value(self, knob: str) -> KnobValue:
        return self._entries[knob].value

    def outcomes(self, order: list[str]) -> list[KnobOutcome]:
        result = []
        for knob in order:
            entry = self._entries.get(knob)
            if entry is None:
                continue
            status = entry.status or "not_applied"
            reason = entry.reason if entry.reason is not None else None
            if status == "not_applied" and reason is None:
                reason = entry.unreached
            result.append(
                KnobOutcome(
                    knob=knob,
                    value=entry.value,
                    status=status,
                    reason=reason,
                    applied_at=list(entry.applied_at),
                    applied_count=entry.applied_count,
                )
            )
        return result


class Injector(Protocol):
    """One knob family injected into a script: told its knobs' values, then installed once."""

    def install(self, site: InjectSite) -> None: ...


def where(site: str | None, what: str) -> str:
    """`what at file:line`, or just `what` when the caller's line is unknown."""
    return f"{what} at {site}" if site else what
