"""What the Python API shares with the commands: the one reading of a command line, the device
rule, the knob mapping's name, and the option each keyword stands for.

A knob mapping (knob -> value, what `--set knob=value` builds) is called `recipe` everywhere
in the API, as a `Recipe` is in the docs and the tuner's result (`TuneResult.best_recipe`);
`settings=`, its old name, still works with a DeprecationWarning (`accepts_old_names`).
"""

from __future__ import annotations

import functools
import json
import shlex
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar, cast

from torchdoctor.core.errors import UsageError

#: What a command runs: a command line (`["python", "train.py"]`, "python train.py", a .py
#: path), a workload's name (`"cnn"`, `"path/to/file.py:factory"`) or a trace's path.
Target = str | Path | Sequence[str]

#: A knob mapping, or where one is written: a JSON file of knob values (tune's
#: best_recipe.json), a tune result (tune.json) or a tune run folder (`run --recipe R`).
RecipeSource = Mapping[str, Any] | str | Path

#: File a recipe is read from when a tune run folder is given.
TUNE_BEST = "best_recipe.json"

#: The module a torchrun launch becomes (`torchrun ARGS` is `python -m torch.distributed.run
#: ARGS`): the job is launched as that module, each rank inside (tune/torchrun.py reads it).
TORCHRUN_MODULE = "torch.distributed.run"

#: The API's keywords that name their command's option otherwise than `--keyword-with-dashes`
#: (a unit in the name, a mapping instead of repeated `--set`). A keyword here and its
#: option have the same default (tests/unit/test_api_surface.py).
CLI_FLAGS: Final[Mapping[str, str]] = {
    "recipe": "--set",
    "params": "--param",
    "budget_s": "--budget",
    "max_memory_bytes": "--max-memory",
    "diagnose_first": "--diagnose",
    "search_batch": "--batch-search",
    "joint_trials": "--joint",
    "target_rel_ci": "--target",
    "fmt": "--format",
    "job_timeout_s": "--job-timeout",
}
#: Keywords whose option says the opposite (`measure_phases=True` is `run` without
#: `--throughput`).
CLI_NEGATED_FLAGS: Final[Mapping[str, str]] = {"measure_phases": "--throughput"}

F = TypeVar("F", bound=Callable[..., Any])


class TorchDoctorWarning(UserWarning):
    """Something the API works around and says so (the machine's ceilings not measured: a
    profile judged without them). The commands print each as one `warning:` line on stderr
    (cli/state.py `showing_warnings`); a program filters them with the `warnings` module."""


def accepts_old_names(**renamed: str) -> Callable[[F], F]:
    """Let a function take a keyword by its old name (old="new") with a DeprecationWarning.

    The function's signature (`inspect.signature`, `help`) shows the new names only: the
    wrapper is `functools.wraps`'d, which `inspect` follows."""

    def wrap(function: F) -> F:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            for old, new in renamed.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise UsageError(
                        f"{function.__name__}() got both {old}= and {new}=",
                        hint=f"{old}= is the old name of {new}=: give {new}= only",
                    )
                warnings.warn(
                    f"{function.__name__}({old}=...) is deprecated; use {new}=",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return cast(F, call)

    return wrap


def parse_command(words: Sequence[str]) -> tuple[list[str], bool]:
    """A script's command line -> (argv, module): the one reading of a command, used by every
    command that runs one (`diagnose`, `tune`, `run`, `memory`, `scale` after `--`) and by
    this API.

    `python train.py a b` and `train.py a b` -> (["train.py", "a", "b"], False);
    `python -m pkg.train a` -> (["pkg.train", "a"], True); a torchrun launch
    (`torchrun --nproc_per_node 2 train.py`, `python -m torch.distributed.run ...`) ->
    (["torch.distributed.run", "--nproc_per_node", "2", "train.py"], True): the job, each
    rank inside. Raises UsageError for an empty line, `-m` without a module or `python`
    alone.
    """
    rest = [str(w) for w in words]
    if not rest:
        raise UsageError("no command to run", hint="e.g. -- python train.py")
    if Path(rest[0]).name.startswith("python"):
        rest = rest[1:]
    if rest[:1] == ["-m"]:
        if len(rest) < 2:
            raise UsageError("-m needs a module name", hint="e.g. -- python -m pkg.train")
        return rest[1:], True
    if not rest:
        raise UsageError("no script after python", hint="e.g. -- python train.py")
    if Path(rest[0]).name == "torchrun" or rest[0].endswith(TORCHRUN_MODULE):
        return [TORCHRUN_MODULE, *rest[1:]], True
    return rest, False


def _command(target: Target) -> tuple[list[str], bool] | None:
    """(argv, module) when `target` is a script's command line; None for a workload or trace.

    A sequence is a command line (`["python", "train.py", ...]`, `["-m", "pkg.train"]`,
    `["torchrun", "--nproc_per_node", "2", "train.py"]`); a string is one when it names a .py
    file or starts with `python` or `torchrun` (not `file.py:factory`, a workload).
    """
    words = command_words(target)
    if not words:
        return None
    return parse_command(words)


def command_words(target: Target) -> list[str] | None:
    """The words of `target` when it is a script's command line (`_command`'s rule), not yet
    read: what a check that comes before the reading (`tune`'s) looks at."""
    if isinstance(target, Path):
        words = [str(target)] if target.suffix == ".py" else []
    elif isinstance(target, str):
        split = shlex.split(target)
        first = split[0] if split else ""
        is_script = first.endswith(".py") or first.startswith(("python", "torchrun"))
        # path/to/file.py:factory is a user workload, whatever its file is named.
        words = split if is_script and ":" not in first else []
    else:
        words = [str(w) for w in target]
    return words or None


def workload_options(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """A tuning study's factory options that build its workload with `params` (its own
    parameters, `--param`): the engine's factory takes them (procs `engine_session`)."""
    return {"params": dict(params)} if params else {}


def recipe_strings(recipe: Mapping[str, Any] | None) -> dict[str, str]:
    """A knob mapping as `--set` gives it: every value a string, booleans as true/false."""
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (recipe or {}).items()}


def assignments(recipe: Mapping[str, Any] | None) -> list[str]:
    """A knob mapping as `--set` items (`knob=value`), what `Recipe.parse` reads."""
    return [f"{k}={v}" for k, v in recipe_strings(recipe).items()]


def load_recipe_file(path: Path) -> dict[str, Any]:
    """The knob dict in `path`: a bare {knob: value} (tune's best_recipe.json), a tune result
    (tune.json: its best_recipe), any record with a `recipe`, or a tune run folder.

    Raises UsageError (unreadable) or KnobError (unknown knob, bad value).
    """
    from torchdoctor.knobs import Recipe

    if path.is_dir():
        path = path / TUNE_BEST
    if not path.is_file():
        raise UsageError(
            f"recipe file {str(path)!r} not found",
            hint="pass a JSON file of knob values, e.g. best_recipe.json written by tune",
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"recipe file {str(path)!r} is not readable JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("best_recipe"), dict):
        data = data["best_recipe"]
    elif isinstance(data, dict) and isinstance(data.get("recipe"), dict):
        data = data["recipe"]
    if not isinstance(data, dict):
        raise UsageError(
            f"recipe file {str(path)!r} holds no knob values",
            hint='write it as {"knob": value, ...}, e.g. {"num_workers": 2}',
        )
    return Recipe.from_dict(data).to_dict()


def read_recipe(recipe: RecipeSource | None) -> dict[str, Any]:
    """`recipe=` as a knob mapping: the mapping itself, or the one a path names
    (`load_recipe_file`); nothing is {}."""
    if recipe is None:
        return {}
    if isinstance(recipe, str | Path):
        return load_recipe_file(Path(recipe))
    return dict(recipe)


def recipe_folder(recipe: RecipeSource | None) -> Path | None:
    """The folder a recipe was read from (a tune run folder, or a file's folder), where its
    study's config says how it was tuned; None for a mapping."""
    if not isinstance(recipe, str | Path):
        return None
    path = Path(recipe)
    return path if path.is_dir() else path.parent


def resolve_device(device: str | None) -> str:
    """The device given, else the GPU when there is one (as the commands choose)."""
    if device is not None:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
