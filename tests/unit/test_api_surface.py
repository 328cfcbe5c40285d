"""The public API, walked: every name in `torchdoctor.__all__` that is a function has a real
signature (no *args/**kwargs, every parameter and the result typed, options keyword-only)
and a docstring, each command's function says how to call it, and every option a function
shares with its command has the command's default."""

from __future__ import annotations

import importlib
import inspect
import pydoc
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
import typer

import torchdoctor
from torchdoctor.api import CLI_FLAGS, CLI_NEGATED_FLAGS, COMMANDS
from torchdoctor.cli.main import _register_commands, app

#: Names in `__all__` that are not functions.
NOT_FUNCTIONS = frozenset({"TorchDoctorError", "__version__"})


def _functions() -> list[str]:
    return sorted(set(torchdoctor.__all__) - NOT_FUNCTIONS)


def _commands() -> dict[str, Any]:
    _register_commands()
    group = typer.main.get_command(app)
    return dict(group.commands)  # type: ignore[attr-defined]


def _option_default(command: Any, option: Any) -> Any:
    """An option's default as the command receives it (its parser applied: `--budget 10m` is
    600.0 s)."""
    ctx = command.context_class(command)
    return option.process_value(ctx, option.default)


def _same(api_default: Any, cli_default: Any, *, repeatable: bool) -> bool:
    """A repeatable option (`--set`, `--param`) given no times is what None or an empty
    mapping is to the function: nothing. A list written as text (`--nproc 1,2`) is the
    numbers it reads as ((1, 2); "" is ())."""
    if repeatable and api_default in (None, {}, [], ()) and not cli_default:
        return True
    if isinstance(api_default, tuple) and isinstance(cli_default, str):
        try:
            listed = tuple(float(v) for v in cli_default.split(",") if v.strip())
        except ValueError:
            return False
        return listed == tuple(float(v) for v in api_default)
    same_kind = isinstance(api_default, bool) == isinstance(cli_default, bool)
    return same_kind and bool(api_default == cli_default)


def shared_options(
    function: Callable[..., Any], command: Any, also: Mapping[str, str] | None = None
) -> Iterator[tuple[str, str, Any, Any, bool]]:
    """(keyword, flag, the function's default, the command's, equal?) for every keyword of
    `function` that is an option of `command`; `also`: a second option a keyword stands for
    (keyword -> flag)."""
    options = {
        flag: param
        for param in command.params
        if param.param_type_name == "option"
        for flag in param.opts
    }
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.default is inspect.Parameter.empty:
            continue
        negated = name in CLI_NEGATED_FLAGS
        flag = CLI_NEGATED_FLAGS.get(name) or CLI_FLAGS.get(name, f"--{name.replace('_', '-')}")
        flags = [flag, *([also[name]] if also and name in also else [])]
        for flag in flags:
            option = options.get(flag)
            if option is None:
                continue
            cli = _option_default(command, option)
            if negated:
                cli = not cli
            yield (
                name,
                flag,
                parameter.default,
                cli,
                _same(parameter.default, cli, repeatable=bool(option.multiple)),
            )


@pytest.mark.parametrize("name", _functions())
def test_every_public_function_has_a_real_signature_and_a_docstring(name: str) -> None:
    function = getattr(torchdoctor, name)
    assert inspect.isfunction(function), f"torchdoctor.{name} is {type(function).__name__}"
    signature = inspect.signature(function)
    kinds = {p.kind for p in signature.parameters.values()}
    assert not kinds & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}
    untyped = [p.name for p in signature.parameters.values() if p.annotation is p.empty]
    assert untyped == [] and signature.return_annotation is not signature.empty
    assert inspect.getdoc(function) and len(inspect.getdoc(function) or "") > 40


@pytest.mark.parametrize("name", COMMANDS)
def test_a_commands_function_takes_its_options_by_keyword_and_shows_an_example(
    name: str,
) -> None:
    function = getattr(torchdoctor, name)
    positional = [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.kind is not inspect.Parameter.KEYWORD_ONLY and p.default is not p.empty
    ]
    assert positional == []
    assert "Example:" in (inspect.getdoc(function) or "")
    assert f"torchdoctor {name}" in (inspect.getdoc(function) or "")


@pytest.mark.parametrize("name", COMMANDS)
def test_an_option_shared_with_the_command_has_the_commands_default(name: str) -> None:
    command = _commands()[name]
    functions = [name, *COMPANIONS.get(name, ())]
    also = ALSO_FLAGS.get(name)
    shared = [
        option
        for function in functions
        for option in shared_options(getattr(torchdoctor, function), command, also)
    ]
    assert [(k, flag, api, cli) for k, flag, api, cli, same in shared if not same] == []
    flags = {
        next(o for o in p.opts if o.startswith("--"))
        for p in command.params
        if p.param_type_name == "option"
    }
    # Every option of the command is a keyword of its function, or one the API leaves out
    # on purpose (CLI_ONLY): a new option fails here until its keyword (or reason) is added.
    assert flags - {flag for _, flag, *_ in shared} == CLI_ONLY.get(name, set())


#: Functions that take a command's options beside its own: `torchdoctor.recheck` is `run
#: --recipe R --vs-baseline`.
COMPANIONS: dict[str, tuple[str, ...]] = {"run": ("recheck",)}
#: A keyword that stands for a second option of a command: `run --recipe FILE` is `recipe=`
#: given the file's path (`recipe=` is `--set`'s mapping everywhere).
ALSO_FLAGS: dict[str, dict[str, str]] = {"run": {"recipe": "--recipe"}}

#: Options a command has and its function does not, each with why.
CLI_ONLY: dict[str, set[str]] = {
    # --force: a function writes into the `out` given (a notebook reruns its cells);
    # diagnose --memory: `torchdoctor.memory` is the function for a step's owners.
    "diagnose": {"--force", "--memory"},
    # --final-pairs: --pairs' old name.
    "tune": {"--force", "--final-pairs"},
    # --vs-baseline: the function is another, `torchdoctor.recheck` (COMPANIONS).
    "run": {"--vs-baseline", "--force"},
    # --nproc and --param-dtype: the sharded estimate is `torchdoctor.shard_memory`.
    "memory": {"--force", "--nproc", "--param-dtype"},
    "profile": {"--force"},
    "analyze": {"--force"},
    "diff": {"--force"},
    # --tensorboard: `torchdoctor.integrations.write_scalars(source, log_dir)`.
    "report": {"--tensorboard"},
    # Several machines (--nnodes, --node-rank, --rdzv-endpoint, --local-addr) are studied from
    # the command line, one command per node, node 0 gathering; the function is one node's.
    "scale": {"--nnodes", "--node-rank", "--rdzv-endpoint", "--local-addr", "--force"},
    # --no-threads: --no-sweep-threads' old name.
    "serve": {"--no-threads", "--force"},
    "demo": {"--force"},
}


def test_every_option_of_recheck_is_one_of_run_with_its_default() -> None:
    # `torchdoctor.recheck` is not a command of its own: each keyword is `run`'s option.
    command = _commands()["run"]
    shared = {k: same for k, _, _, _, same in shared_options(torchdoctor.recheck, command)}
    parameters = inspect.signature(torchdoctor.recheck).parameters.values()
    keywords = {p.name for p in parameters if p.default is not p.empty}
    assert set(shared) == keywords and all(shared.values())
    assert "Example:" in (inspect.getdoc(torchdoctor.recheck) or "")
    assert "torchdoctor run --recipe R --vs-baseline" in (inspect.getdoc(torchdoctor.recheck) or "")


def test_a_list_written_as_text_is_compared_as_its_numbers() -> None:
    assert _same((1, 2), "1,2", repeatable=False) and _same((), "", repeatable=False)
    assert not _same((1, 2), "1,4", repeatable=False)
    assert not _same((1, 2), "one,two", repeatable=False)


def test_scales_job_timeout_is_the_scale_stages() -> None:
    from torchdoctor.core.defaults import SCALE_JOB_TIMEOUT_S
    from torchdoctor.scale.launch import JOB_TIMEOUT_S

    assert SCALE_JOB_TIMEOUT_S == JOB_TIMEOUT_S


def test_every_renamed_keyword_names_an_option_of_some_command() -> None:
    flags = {flag for command in _commands().values() for p in command.params for flag in p.opts}
    assert set(CLI_FLAGS.values()) | set(CLI_NEGATED_FLAGS.values()) <= flags


def test_a_default_that_differs_from_the_commands_is_found() -> None:
    probe = typer.Typer()

    @probe.command()
    def tune(
        budget: float = typer.Option("5m", "--budget", parser=lambda t: 300.0 if t else 0.0),
        settings: list[str] = typer.Option([], "--set"),  # noqa: B008
        seed: int = typer.Option(1, "--seed"),
        batch_search: bool = typer.Option(True, "--batch-search/--no-batch-search"),
    ) -> None:
        """A command whose budget and seed differ from `torchdoctor.tune`'s."""

    command = typer.main.get_command(probe)
    found = {k: same for k, _, _, _, same in shared_options(torchdoctor.tune, command)}
    assert found == {"budget_s": False, "recipe": True, "seed": False, "search_batch": True}


@pytest.mark.parametrize(
    "name", ["analyze", "diagnose", "report", "scale", "serve", "tune", "workloads"]
)
def test_the_function_keeps_its_name_once_the_stage_of_that_name_is_loaded(name: str) -> None:
    stage = importlib.import_module(f"torchdoctor.{name}")
    assert inspect.ismodule(stage) and sys.modules[f"torchdoctor.{name}"] is stage
    function = getattr(torchdoctor, name)
    assert inspect.isfunction(function) and function.__module__.startswith("torchdoctor.api")
    # What help() shows is the function's own signature and docstring.
    shown = pydoc.render_doc(function, renderer=pydoc.plaintext)
    assert f"torchdoctor {name}" in shown and "function" in shown.splitlines()[0]
