"""The options several commands share: one name, one meaning, one unit.

An option that appears in more than one command is declared here (or read by a parser here),
so that `--budget` is a duration, `--pairs` a count of fresh process pairs, `--warmup` a count
of warm-up steps and `--out` a run folder in every command that takes it
(tests/unit/cli/test_option_vocabulary.py walks the commands and holds them to it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import typer

from torchdoctor.core.errors import KnobError, UsageError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_SIZE_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_duration(text: str | float) -> float:
    """'10m' -> 600.0; '90s', '1.5h' and plain seconds ('90', or a number) also work."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        text = f"{text:g}" if text > 0 else str(text)
    match = _DURATION.match(str(text))
    if not match or float(match.group(1)) <= 0:
        raise UsageError(f"cannot read duration {text!r}", hint="write e.g. 10m, 90s, 90 or 1h")
    return float(match.group(1)) * _DURATION_UNITS[(match.group(2) or "").lower()]


def parse_size(text: str) -> int:
    """'4GiB' / '4G' / '512MB' -> bytes (binary multiples: memory is sized in pages)."""
    match = _SIZE.match(text)
    if not match or float(match.group(1)) <= 0:
        raise UsageError(f"cannot read memory size {text!r}", hint="write e.g. 4GiB or 512MiB")
    return int(float(match.group(1)) * 1024 ** _SIZE_POWERS[match.group(2).lower()])


def parse_int_list(text: str, option: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]: positive integers (world sizes, `--nproc`), the option named in
    the refusal."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"cannot read {option} {text!r}", hint="write e.g. 1,2,4") from None
    if not values or any(v < 1 for v in values):
        raise UsageError(f"{option} needs positive integers, got {text!r}", hint="write e.g. 1,2,4")
    return values


#: What every `--nproc` counts.
NPROC_HELP = "Processes (ranks) per node"


def parse_budget(text: str | float) -> float:
    """`--budget`'s value in seconds (`parse_duration`), its errors naming the option."""
    try:
        return parse_duration(text)
    except UsageError as exc:
        raise UsageError(f"--budget {text}: not a duration", hint=exc.hint) from None


def duration_text(seconds: float) -> str:
    """A default duration as a user writes it: 600 -> '10m', 10 -> '10s', 3600 -> '1h'
    (`parse_duration` reads it back to the same seconds)."""
    for unit, size in (("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


#: What every `--budget` says of its unit.
DURATION_HELP = "A duration: 90, 90s, 10m or 1h (a plain number is seconds)."


def budget_option(default: str | None, what: str) -> Any:
    """`--budget`: wall time as a duration in every command (the value reaches the command
    in seconds, a float)."""
    return typer.Option(
        default,
        "--budget",
        parser=parse_budget,
        metavar="DURATION",
        help=f"{what} {DURATION_HELP}",
    )


#: What every `--warmup` counts.
WARMUP_HELP = "Warm-up steps, run before the measured ones and not counted."


def warmup_option(default: int, why: str) -> Any:
    """`--warmup`: warm-up steps in every command; `why` says what they are for here and why
    this command's default is what it is."""
    return typer.Option(default, "--warmup", min=0, help=f"{WARMUP_HELP} {why}")


#: What every `--pairs` counts.
PAIRS_HELP = "Fresh process pairs of the A/B (each pair two new processes)."


def pairs_option(default: int, minimum: int, why: str) -> Any:
    """`--pairs`: fresh process pairs of an A/B (`run --vs-baseline`, tune's final A/B)."""
    return typer.Option(default, "--pairs", min=minimum, help=f"{PAIRS_HELP} {why}")


def out_option(
    what: str = "Run folder to write (default: a new one under torchdoctor-runs/).",
) -> Any:
    """`--out`: the run folder a command writes; an existing one must be empty (`--force`)."""
    return typer.Option(
        None, "--out", help=f"{what} An existing folder must be empty, unless --force."
    )


def force_option() -> Any:
    """`--force`: write into a non-empty `--out`, replacing the files of the same names."""
    return typer.Option(
        False,
        "--force",
        help="Write into a non-empty --out folder, replacing files of the same names.",
    )


def check_out(out: Path | None, *, force: bool) -> None:
    """The one rule of `--out`: a new or empty folder, or a non-empty one with `--force`.

    Checked before anything runs, so a refused folder is left as it was."""
    if out is None or not out.exists():
        return
    if not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a folder", hint="pass a folder")
    if not force and any(out.iterdir()):
        raise UsageError(
            f"--out {out} exists and is not empty",
            hint="pass a new folder, or --force to write into it",
        )


def given(ctx: typer.Context, name: str) -> bool:
    """Whether the option `name` (its parameter's name) was given on the command line."""
    # typer vendors click: the source is read by its name, not its class.
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def refuse_given(ctx: typer.Context, names: Iterable[str], *, case: str, hint: str) -> None:
    """An option this case cannot honour, given anyway: one line, exit 2, before anything
    runs (an option accepted and then ignored would measure something the user did not ask
    for)."""
    shown = [_flag_of(ctx, name) for name in names if given(ctx, name)]
    if shown:
        raise UsageError(f"{', '.join(shown)} cannot be honoured {case}", hint=hint)


def _flag_of(ctx: typer.Context, name: str) -> str:
    for param in ctx.command.params:
        if param.name == name and param.opts:
            value = ctx.params.get(name)
            if getattr(param, "is_flag", False) and value is False and param.secondary_opts:
                return str(param.secondary_opts[0])
            return str(param.opts[0])
    return name


#: --device's help for the commands that run a workload.
DEVICE_HELP = "cpu or cuda[:N]; default: cuda when a GPU is available, else cpu."


def device_option(help: str = DEVICE_HELP) -> Any:
    """`--device`, the same flag and default in every command that runs a workload."""
    return typer.Option(None, "--device", help=help)


def seed_option() -> Any:
    """`--seed`: one seed for the weights, the data and its order, in every command."""
    return typer.Option(0, "--seed", help="Seed for weights, data and its order.")


def default_device(device: str | None, *, cuda_available: Callable[[], bool] | None = None) -> str:
    """The device a command runs on: the one given, else the GPU when there is one.

    PyTorch users expect a tool on a GPU machine to use the GPU; a CPU default would measure
    and tune a job they never run. torch is imported only when no device was given.
    """
    if device is not None:
        return device
    if cuda_available is None:
        import torch

        cuda_available = torch.cuda.is_available
    return "cuda" if cuda_available() else "cpu"


def param_option() -> Any:
    """`--param name=value`: a parameter of the workload itself (what its factory takes), in
    every command that builds one."""
    return typer.Option(
        [],
        "--param",
        help="Workload parameter name=value (repeatable), e.g. --param attention=manual.",
    )


def parse_settings(items: list[str]) -> dict[str, str]:
    """`--set knob=value` (repeatable) -> {knob: value}, checked as the recipe is built."""
    settings: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"cannot read --set {item!r}", hint="write it as knob=value")
        settings[key.strip()] = value.strip()
    return settings


def knob_values(items: list[str]) -> dict[str, str]:
    """`--set knob=value` (repeatable) -> {knob: value} for a command that hands its recipe to
    the API, read as `Recipe.parse` reads the items (a malformed one refused in its words)."""
    values: dict[str, str] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise KnobError(f"cannot read recipe setting {item!r}", hint="write it as knob=value")
        values[name.strip()] = text
    return values


def parse_workload_params(items: list[str]) -> dict[str, Any]:
    """`--param name=value` -> {name: value}, the value an int, else a float, else a str."""
    params: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"cannot read workload parameter {item!r}", hint="write name=value")
        value: Any = text
        for convert in (int, float):
            try:
                value = convert(text)
                break
            except ValueError:
                continue
        params[name.strip()] = value
    return params
