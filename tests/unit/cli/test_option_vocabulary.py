"""One vocabulary of options: a name shared by several commands means one thing, in one unit,
in every one of them; and an option a command cannot honour in a case is refused in one line
(exit 2) before anything runs, never accepted and ignored.

The commands are read through typer's own model of them (the options as click will parse
them), so a command added later is held to the table without being listed here.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import typer

from cli_output import one_error_line
from torchdoctor.cli import main as cli_main
from torchdoctor.cli.options import (
    DURATION_HELP,
    NPROC_HELP,
    PAIRS_HELP,
    WARMUP_HELP,
    parse_budget,
    parse_duration,
    parse_workload_params,
)

#: Every option name two commands share, with its one meaning: the Python type the command
#: receives, the parser that reads it (None: click's own), and words its help must hold.
#: A shared name missing here fails `test_every_shared_option_has_one_declared_meaning`.
VOCABULARY: dict[str, tuple[Any, Any, str]] = {
    "--budget": (float, parse_budget, DURATION_HELP),
    "--pairs": (int, None, PAIRS_HELP),
    "--warmup": (int, None, WARMUP_HELP),
    "--out": (Path, None, "unless --force"),
    "--force": (bool, None, "non-empty --out"),
    "--device": (str, None, "cpu or cuda"),
    "--seed": (int, None, "Seed"),
    "--set": (list[str], None, "knob=value"),
    "--param": (list[str], None, "name=value"),
    "--steps": (int, None, "step"),
    "--max-memory": (str, None, "GiB"),
    "--quick": (bool, None, ""),
    "--report": (bool, None, "run folder"),
    "--nproc": (str, None, NPROC_HELP),
}

#: Commands whose option of a shared name is something else, each with why.
EXCEPTIONS = {
    # `report` writes one file (the report), not a run folder: `-o/--out` names that file.
    ("report", "--out"),
}


def _commands() -> dict[str, Any]:
    cli_main._register_commands()
    group = typer.main.get_command(cli_main.app)
    return {name: cmd for name, cmd in group.commands.items() if not name.startswith("_")}  # type: ignore[attr-defined]


def _options() -> dict[str, list[tuple[str, Any]]]:
    """option name -> [(command, its click option)], hidden (deprecated) aliases left out."""
    found: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for command_name, command in _commands().items():
        for param in command.params:
            if param.param_type_name != "option" or param.hidden:
                continue
            for name in param.opts:
                if name.startswith("--"):
                    found[name].append((command_name, param))
    return found


def _annotation(param: Any) -> Any:
    annotation = param.type_descriptor.annotation
    # `int | None` and `int` are one unit: an unset option is not another meaning.
    args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    if getattr(annotation, "__origin__", None) is not list and len(args) == 1:
        return args[0]
    return annotation


def test_every_shared_option_has_one_declared_meaning() -> None:
    shared = {name for name, uses in _options().items() if len({c for c, _ in uses}) > 1}
    assert shared - set(VOCABULARY) == set(), "declare each shared option's meaning above"


@pytest.mark.parametrize("name", sorted(VOCABULARY))
def test_a_shared_option_means_one_thing_in_every_command(name: str) -> None:
    kind, parser, words = VOCABULARY[name]
    uses = [(c, p) for c, p in _options().get(name, []) if (c, name) not in EXCEPTIONS]
    assert uses, f"{name} is in no command"
    for command, param in uses:
        assert _annotation(param) == kind, f"{command} {name}: {param.type_descriptor.annotation}"
        assert param.type_descriptor.parameter_info.parser is parser, f"{command} {name}"
        assert words in (param.help or ""), f"{command} {name}: {param.help!r}"


def test_threads_is_one_thing_where_it_is_an_option() -> None:
    # `scale --threads N` is threads per rank; serve's sweep over threads has its own name.
    uses = _options()["--threads"]
    assert [c for c, _ in uses] == ["scale"]
    assert "--sweep-threads" in [n for n, u in _options().items() if ("serve" in dict(u))]


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("10m", 600.0), ("1.5h", 5400.0)]
)
def test_a_budget_reads_every_form_of_a_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(seconds) == seconds  # a number given from Python is seconds


def test_a_budget_in_plain_seconds_still_works_where_it_was_seconds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # bench took float seconds: `--budget 0.2` still reads as 0.2 s.
    assert cli_main.main(["--json", "bench", "1 + 1", "--budget", "0.2"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "torchdoctor/measurement"


def _script(tmp_path: Path) -> str:
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('must not run')\n")
    return str(script)


#: (command line, the option named in the refusal); SCRIPT stands for a script's path.
REFUSED = [
    (["run", "--set", "threads=1", "--", "python", "SCRIPT"], "--set"),
    (["run", "--param", "rows=8", "--", "python", "SCRIPT"], "--param"),
    (["run", "--seed", "3", "--", "python", "SCRIPT"], "--seed"),
    (["run", "--device", "cpu", "--", "python", "SCRIPT"], "--device"),
    (["run", "--throughput", "--", "python", "SCRIPT"], "--throughput"),
    (["run", "--pairs", "4", "--", "python", "SCRIPT"], "--pairs"),
    (["run", "mlp", "--out", "OUT"], "--out"),
    (["tune", "--batch-search", "--", "python", "SCRIPT"], "--batch-search"),
    (["tune", "--no-batch-search", "--", "python", "SCRIPT"], "--no-batch-search"),
    (["tune", "--hold-effective-batch", "--", "python", "SCRIPT"], "--hold-effective-batch"),
    (["tune", "--resume", "OUT", "--budget", "1m"], "--budget"),
    (["tune", "--resume", "OUT", "--set", "threads=1"], "--set"),
    (["tune", "--resume", "OUT", "--seed", "1"], "--seed"),
    (["tune", "--resume", "OUT", "--pairs", "4"], "--pairs"),
    (["diagnose", "--set", "threads=1", "--", "python", "SCRIPT"], "--set"),
    (["diagnose", "--device", "cpu", "--", "python", "SCRIPT"], "--device"),
    (["memory", "--seed", "1", "--", "python", "SCRIPT"], "--seed"),
]


@pytest.mark.parametrize(("argv", "option"), REFUSED)
def test_an_option_a_case_cannot_honour_is_refused_in_one_line(
    argv: list[str], option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run-folder"
    line = [{"SCRIPT": _script(tmp_path), "OUT": str(out)}.get(a, a) for a in argv]
    assert cli_main.main(line) == 2
    error = one_error_line(capsys.readouterr().err)
    assert option in error and "cannot be honoured" in error
    assert not out.exists()  # refused before anything was written


TRACE = Path(__file__).parents[2] / "data" / "diff" / "job_plain.json.gz"
#: Each command that writes a run folder, with what it runs on.
WRITERS = {
    "diagnose": ["--", "python", "SCRIPT"],
    "run": ["--", "python", "SCRIPT"],
    "memory": ["--", "python", "SCRIPT"],
    "tune": ["mlp"],
    "profile": ["mlp"],
    "serve": ["mlp"],
    "scale": ["mlp"],
    "demo": [],
    "analyze": [str(TRACE)],
    "diff": [str(TRACE), str(TRACE)],
}


def test_every_command_that_writes_a_run_folder_is_held_to_the_rule() -> None:
    with_out = {c for c, _ in _options()["--out"]} - {c for c, n in EXCEPTIONS if n == "--out"}
    assert with_out == set(WRITERS)
    assert with_out == {c for c, _ in _options()["--force"]}


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_a_non_empty_out_is_refused_without_force(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "old"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    target = [_script(tmp_path) if a == "SCRIPT" else a for a in WRITERS[command]]
    assert cli_main.main([command, "--out", str(out), *target]) == 2
    assert "is not empty" in one_error_line(capsys.readouterr().err)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_tune_out_of_a_stored_study_points_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "study"
    old.mkdir()
    (old / "study.db").write_bytes(b"")
    assert cli_main.main(["tune", "mlp", "--out", str(old), "--force"]) == 2
    assert f"--resume {old}" in one_error_line(capsys.readouterr().err)


def test_final_pairs_is_a_deprecated_alias_that_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = ["tune", "mlp", "--pairs", "4", "--final-pairs", "4", "--out", str(tmp_path / "t")]
    assert cli_main.main(both) == 2
    assert "--final-pairs is the old name of --pairs" in capsys.readouterr().err


def test_workload_params_are_read_as_numbers_where_they_are() -> None:
    assert parse_workload_params(["rows=8", "lr=0.5", "attention=manual"]) == {
        "rows": 8,
        "lr": 0.5,
        "attention": "manual",
    }


def test_serve_no_threads_is_a_deprecated_alias_that_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "old"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    # Read, warned of, and the command goes on to its next check (here: the folder).
    assert cli_main.main(["serve", "mlp", "--no-threads", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--no-threads is deprecated; use --no-sweep-threads" in err
    assert "is not empty" in err
