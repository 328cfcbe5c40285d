"""A torchrun command as the tuner's arm: its options read, a rendezvous of its own per arm.

`tune -- torchrun --nproc_per_node 2 train.py` is split by the CLI into
`-m torch.distributed.run --nproc_per_node 2 train.py`. The tuner drives the job as one arm
(rank 0 talks to it, collect/rank_control.py), and two arms live at once for the interleaved
A/B, so two torchrun jobs must not meet at one rendezvous: torchrun's default static rendezvous
is MASTER_PORT 29500 for every job on a host. An arm's torchrun gets `--standalone` (a local
rendezvous on a free port, the torchrun docs' "Single-node multi-worker") when the command
names no rendezvous; a command that pins one (a port, an endpoint) or spans nodes is refused,
since its arms would join each other's job.

The DDP knobs (knobs/ddp.py) are offered to a torchrun command only: any other script builds
no DistributedDataParallel, and each of them would cost a launch to learn that. The FSDP knobs
(knobs/fsdp.py) likewise, and only where the job's source calls `fully_shard` (the script and
the Python files beside it, read, not run: `calls_fully_shard`); their values that cannot act
on the job's ranks (`FSDPArgument.for_world`: a resharding group that does not divide them)
are not tried. Asked for by name (`--knobs`) on any other command, they are bad input.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Final

from torchdoctor.core.errors import TuneError

if TYPE_CHECKING:
    from torchdoctor.tune.space import KnobSpec

#: The module names the CLI gives a torchrun command (`torchdoctor.api.parse_command`).
TORCHRUN_MODULES: Final = ("torch.distributed.run", "torch.distributed.launch")
#: torchrun options that take no value.
_FLAGS: Final = frozenset(
    {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path"}
)
#: Options that pin the job's rendezvous (two arms would join one job).
_PINNED: Final = frozenset(
    {
        "--rdzv-endpoint",
        "--rdzv_endpoint",
        "--master-port",
        "--master_port",
        "--master-addr",
        "--master_addr",
        "--rdzv-id",
        "--rdzv_id",
    }
)
_NODES: Final = ("--nnodes",)
#: The most Python files read beside a job's script to find its `fully_shard` call: a
#: project's own modules, not a checkout of every dependency.
MAX_SOURCE_FILES: Final = 500
#: Folders never read for it (environments and caches, not the project's code).
_SKIPPED_DIRS: Final = frozenset({".venv", "venv", "site-packages", "__pycache__", ".git"})


def is_torchrun(command: Sequence[str] | None, module: bool) -> bool:
    """Whether a tuned command (argv, module) is a torchrun job."""
    return bool(module and command and command[0] in TORCHRUN_MODULES)


def torchrun_options(argv: Sequence[str]) -> dict[str, str | None]:
    """torchrun's own options in `argv` (after the module name, before the script): name ->
    value (None for a flag). `--opt=value` and `--opt value` both read."""
    options: dict[str, str | None] = {}
    rest = list(argv[1:])
    while rest and rest[0].startswith("-"):
        word = rest.pop(0)
        name, eq, value = word.partition("=")
        if eq:
            options[name] = value
        elif name in _FLAGS or not rest:
            options[name] = None
        else:
            options[name] = rest.pop(0)
    return options


def job_script(argv: Sequence[str]) -> str | None:
    """The script a torchrun command runs (the first word after its options), or None (a
    module, `-m`, or nothing)."""
    options = torchrun_options(argv)
    if "-m" in options or "--module" in options:
        return None
    rest = list(argv[1:])
    while rest and rest[0].startswith("-"):
        word = rest.pop(0)
        name, eq, _ = word.partition("=")
        if not eq and name not in _FLAGS and rest:
            rest.pop(0)
    return rest[0] if rest else None


def check_tunable(argv: Sequence[str]) -> None:
    """Raise TuneError when the torchrun command cannot be run as two arms on this host."""
    options = torchrun_options(argv)
    pinned = sorted(set(options) & _PINNED)
    if pinned:
        raise TuneError(
            f"the torchrun command pins its rendezvous ({pinned[0]}), and the tuner runs two of "
            "its jobs at once, which would join each other",
            hint="drop the option: each arm gets torchrun --standalone (a free local port)",
        )
    nodes = next((options[n] for n in _NODES if n in options), None)
    if nodes is not None and nodes.split(":")[-1] not in ("1", ""):
        raise TuneError(
            f"the torchrun command spans nodes (--nnodes {nodes}); the tuner drives a job on "
            "this host only",
            hint="tune it on one node (--nnodes 1), then run the recipe on every node",
        )


def arm_argv(argv: Sequence[str]) -> list[str]:
    """`argv` with `--standalone` after the module name when it names no rendezvous."""
    if "--standalone" in torchrun_options(argv):
        return list(argv)
    return [argv[0], "--standalone", *argv[1:]]


def ddp_knob_names() -> frozenset[str]:
    """The knobs only a DistributedDataParallel takes (`DDPArgument`)."""
    from torchdoctor.knobs import DDPArgument, catalogue

    return frozenset(k.name for k in catalogue() if isinstance(k.applies_to, DDPArgument))


def fsdp_knob_names() -> frozenset[str]:
    """The knobs only a `fully_shard` call takes (`FSDPArgument`)."""
    from torchdoctor.knobs import FSDPArgument, catalogue

    return frozenset(k.name for k in catalogue() if isinstance(k.applies_to, FSDPArgument))


def calls_fully_shard(script: Path, *, limit: int = MAX_SOURCE_FILES) -> bool:
    """Whether the script, or a Python file in its folder and below, names `fully_shard`
    (an import, a call, an attribute): where a job's sharding can be built without a library
    of its own. Read, not run; a file that does not parse is passed over."""
    folder = script.parent
    files = [script]
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("."))
        files += [Path(root) / n for n in sorted(names) if n.endswith(".py")]
        if len(files) > limit:
            break
    for path in files[: limit + 1]:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "fully_shard" in text and _names_fully_shard(text):
            return True
    return False


def _names_fully_shard(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "fully_shard":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "fully_shard":
            return True
        if isinstance(node, ast.ImportFrom) and any(a.name == "fully_shard" for a in node.names):
            return True
    return False


def check_fsdp_knobs(
    asked: Sequence[str] | None, argv: Sequence[str] | None, module: bool, cwd: str | None
) -> None:
    """Raise TuneError when `--knobs` names an FSDP knob and the command is no torchrun job, or
    its script never calls `fully_shard` (bad input, said before any launch)."""
    named = sorted(set(asked or ()) & fsdp_knob_names())
    if not named:
        return
    if not is_torchrun(argv, module):
        raise TuneError(
            f"{named[0]} acts where a torchrun job shards its model with fully_shard, and this "
            "command is no torchrun job",
            hint="tune the job as it runs: tune -- torchrun --nproc-per-node N train.py",
        )
    assert argv is not None
    script = job_script(argv)
    if script is None:
        return  # a module (-m): its source is not read here
    path = Path(cwd or ".") / script
    if path.is_file() and not calls_fully_shard(path):
        raise TuneError(
            f"{named[0]} acts at fully_shard(...), and {script} (nor a Python file beside it) "
            "never calls fully_shard",
            hint=f"drop {', '.join(named)} from --knobs, or shard the model with "
            "torch.distributed.fsdp.fully_shard",
        )


def offered_to_job(
    specs: list[KnobSpec], argv: Sequence[str] | None, module: bool, cwd: str | None
) -> list[KnobSpec]:
    """The knobs a command's job can take: the DDP and FSDP knobs on a torchrun job only, the
    FSDP ones where its source calls fully_shard, with the values its ranks allow."""
    if not is_torchrun(argv, module):
        only_jobs = ddp_knob_names() | fsdp_knob_names()
        return [s for s in specs if s.name not in only_jobs]
    assert argv is not None
    script = job_script(argv)
    if script is not None:
        path = Path(cwd or ".") / script
        if path.is_file() and not calls_fully_shard(path):
            specs = [s for s in specs if s.name not in fsdp_knob_names()]
    ranks = job_world_size(argv)
    return specs if ranks is None else [_for_world(s, ranks) for s in specs]


def _for_world(spec: KnobSpec, ranks: int) -> KnobSpec:
    from torchdoctor.knobs import FSDPArgument, get_knob

    part = get_knob(spec.name).applies_to
    if not isinstance(part, FSDPArgument) or part.for_world is None:
        return spec
    check = part.for_world
    return replace(spec, values=tuple(v for v in spec.values if check(v, ranks) is None))


def job_world_size(argv: Sequence[str]) -> int | None:
    """The ranks a one-node torchrun command starts (`--nproc_per_node N`); None when it does
    not say in a number ("auto", "gpu": decided on the host)."""
    options = torchrun_options(argv)
    value = options.get("--nproc_per_node", options.get("--nproc-per-node"))
    return int(value) if value is not None and value.isdigit() else None
