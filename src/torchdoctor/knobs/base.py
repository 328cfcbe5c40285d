"""What a knob is: a named setting with a domain, a default, where it applies and how safe it is.

A knob only *declares*; the engine applies a recipe's values when it builds a training session
(see `torchdoctor.engine.session`), using the helpers each family module exports.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from torchdoctor.core.errors import KnobError, KnobNotApplicable
from torchdoctor.core.gpu import older_than_ampere
from torchdoctor.core.vocabulary import Safety
from torchdoctor.knobs.parts import AppliesTo, KnobValue, Ladder, Script, Serving, WriteBack

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


@dataclass(frozen=True)
class ApplicabilityContext:
    """Where a recipe is going to run: what applicability checks look at.

    `settings` holds the recipe's resolved values, so a knob can depend on another one
    (persistent_workers needs num_workers > 0). `workload_params` are the workload's own
    parameters that a recipe may set (`parts.WorkloadParameter`): empty when the workload
    cannot be rebuilt with other ones (no `with_params`), or there is no workload.
    `cuda_capability` is the CUDA device's (major, minor) compute capability; None off CUDA or
    when unknown (then no knob is refused for it). `context_for` fills it with
    `cuda_capability_of(device)`.
    """

    device: str
    workload_kind: str | None = None
    workload_name: str | None = None
    supports_checkpointing: bool = True
    torch_version: tuple[int, int] = field(default_factory=lambda: torch_version_tuple())
    settings: Mapping[str, KnobValue] = field(default_factory=dict)
    cuda_capability: tuple[int, int] | None = None
    workload_params: Mapping[str, object] = field(default_factory=dict)

    @property
    def device_type(self) -> str:
        return self.device.split(":", 1)[0]


def cuda_capability_of(device: str) -> tuple[int, int] | None:
    """(major, minor) compute capability of a CUDA device ("cuda", "cuda:1"), else None.

    Never touches torch.cuda for another device type. None as well when CUDA is unavailable
    (a recipe checked for a GPU on a machine without one is checked for domains only) and on
    ROCm builds, whose "capability" is the gfx architecture, not NVIDIA's numbering that the
    capability checks below are written against.
    """
    import torch

    kind, _, index = device.partition(":")
    if kind != "cuda" or torch.version.hip or not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(int(index) if index else None)
    return int(major), int(minor)


def torch_version_tuple(version: str | None = None) -> tuple[int, int]:
    """(major, minor) of the installed torch (`2.13.0+cpu` -> (2, 13))."""
    if version is None:
        import torch

        version = torch.__version__
    text = version
    parts = text.split("+", 1)[0].split(".")
    return int(parts[0]), int(parts[1])


@dataclass(frozen=True)
class Choice:
    """A finite domain of values (booleans and named modes)."""

    values: tuple[KnobValue, ...]

    def parse(self, text: str) -> KnobValue:
        """A value of the domain: an integer of it by its digits, a named mode by its name
        (any case), a boolean by the usual words, else `text` unchanged (refused after)."""
        lowered = text.strip().lower()
        for value in self.values:
            if isinstance(value, int) and not isinstance(value, bool) and str(value) == lowered:
                return value
            if isinstance(value, str) and value.lower() == lowered:
                return value
        if any(isinstance(v, bool) for v in self.values):
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
        return text

    def contains(self, value: object) -> bool:
        return any(type(value) is type(v) and value == v for v in self.values)

    def describe(self) -> str:
        return "{" + ", ".join(show_value(v) for v in self.values) + "}"


@dataclass(frozen=True)
class IntRange:
    """Integers lo..hi inclusive; `hi` may be computed (threads <= the machine's cores)."""

    lo: int
    hi: int | Callable[[], int]

    @property
    def upper(self) -> int:
        return self.hi() if callable(self.hi) else self.hi

    def parse(self, text: str) -> KnobValue:
        try:
            return int(text.strip())
        except ValueError:
            return text

    def contains(self, value: object) -> bool:
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and self.lo <= value <= self.upper
        )

    def describe(self) -> str:
        return f"integers {self.lo}..{self.upper}"


Domain = Choice | IntRange


def cpu_count() -> int:
    return os.cpu_count() or 1


def show_value(value: KnobValue) -> str:
    """A knob value as a recipe or a message writes it (a bool in lower case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def always(_: ApplicabilityContext) -> str | None:
    return None


def every_value(_value: KnobValue, _ctx: ApplicabilityContext) -> str | None:
    return None


@dataclass(frozen=True)
class Knob:
    """One optimization setting.

    `default` is the value that changes nothing about a plain training loop; `None` means
    "whatever the workload (or torch) picks" for knobs whose natural default depends on them.
    `not_applicable` returns a reason when the knob cannot be set in a context, else None;
    `value_not_applicable` the same for one value of it (bf16 but not fp16 needs Ampere).
    A reason never spells the `knob=value` it rules out: the tuner groups skipped settings by it.

    The parts it owns (`knobs.parts`; None only while a knob is being written, which the
    catalogue test refuses): `applies_to`, how it acts on plain torch objects; `write_back`, how
    it goes into the user's files; `ladder`, where the tuner tries it; `script`, how an
    unmodified script takes it (or why it cannot); `serving` (None: not an inference variant),
    how `serve` applies it to a model it serves. The rules that prescribe it name it in their
    prescriptions (`diagnose.rules.prescribing` reads them back); `no_rule` says why none does.
    """

    name: str
    family: str
    description: str
    code_change: str
    safety: Safety
    domain: Domain
    default: KnobValue
    not_applicable: Callable[[ApplicabilityContext], str | None] = always
    value_not_applicable: Callable[[KnobValue, ApplicabilityContext], str | None] = every_value
    device_defaults: Mapping[str, KnobValue] = field(default_factory=dict)
    applies_to: AppliesTo | None = None
    write_back: WriteBack | None = None
    ladder: Ladder | None = None
    script: Script | None = None
    no_rule: str | None = None
    serving: Serving | None = None

    def default_for(self, device: str) -> KnobValue:
        return self.device_defaults.get(device.split(":", 1)[0], self.default)

    def parse(self, text: str) -> KnobValue:
        """Turn a command-line string into a value of this knob's domain, or raise KnobError."""
        value = self.domain.parse(text)
        self.check_value(value)
        return value

    def check_value(self, value: object) -> None:
        if value is None and self.default is None:
            return
        if not self.domain.contains(value):
            raise KnobError(
                f"invalid value {value!r} for knob '{self.name}'",
                hint=f"'{self.name}' takes {self.domain.describe()}",
            )

    def check_applicable(self, value: KnobValue, ctx: ApplicabilityContext) -> None:
        """Raise KnobError when setting this knob to `value` makes no sense in `ctx`.

        Setting a knob to its default is always allowed: it changes nothing.
        """
        if value == self.default_for(ctx.device):
            return
        reason = self.not_applicable(ctx)
        if reason is None:
            reason = self.value_not_applicable(value, ctx)
        if reason is not None:
            raise self.refusal(value, reason)

    def refusal(self, value: KnobValue, reason: str) -> KnobNotApplicable:
        """The error that says setting this knob to `value` does not apply here, and why."""
        return KnobNotApplicable(
            f"knob '{self.name}={show_value(value)}' does not apply here: {reason}",
            knob=self.name,
            reason=reason,
            hint=f"remove '{self.name}' from the recipe",
        )

    def show(self, value: KnobValue) -> str:
        return show_value(value)


# Applicability helpers shared by the families.


def cuda_only(ctx: ApplicabilityContext) -> str | None:
    if ctx.device_type != "cuda":
        return f"it only acts on CUDA devices and the device is '{ctx.device}'"
    return None


def torchrun_only(taker: str) -> Callable[[ApplicabilityContext], str | None]:
    """The check of a knob only `taker`, in a user's torchrun job, takes: a built-in workload
    runs in one process, so it is refused there."""

    def check(ctx: ApplicabilityContext) -> str | None:
        if ctx.workload_kind is not None or ctx.workload_name is not None:
            return f"only {taker} takes it, and a built-in workload runs in one process"
        return None

    return check


def before_ampere(ctx: ApplicabilityContext) -> tuple[int, int] | None:
    """The CUDA device's capability when it is known and older than Ampere, else None."""
    return older_than_ampere(ctx.device, ctx.cuda_capability)


def needs_workers(ctx: ApplicabilityContext) -> str | None:
    workers = ctx.settings.get("num_workers")
    if not isinstance(workers, int) or workers <= 0:
        return "it needs DataLoader worker processes; set num_workers >= 1 as well"
    return None


def needs_compile(ctx: ApplicabilityContext) -> str | None:
    if ctx.settings.get("compile", "off") == "off":
        return "it only matters with torch.compile; set compile=default (or another mode)"
    return None
