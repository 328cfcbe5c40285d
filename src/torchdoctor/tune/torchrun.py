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
no DistributedDataParallel, and each of them would cost a launch to learn that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from torchdoctor.core.errors import TuneError

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


def job_world_size(argv: Sequence[str]) -> int | None:
    """The ranks a one-node torchrun command starts (`--nproc_per_node N`); None when it does
    not say in a number ("auto", "gpu": decided on the host)."""
    options = torchrun_options(argv)
    value = options.get("--nproc_per_node", options.get("--nproc-per-node"))
    return int(value) if value is not None and value.isdigit() else None
