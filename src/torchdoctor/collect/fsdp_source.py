"""Which FSDP a script shards with, read from its source before it runs.

FSDP1 (`FullyShardedDataParallel`, a wrapper module with flat parameters) and FSDP2
(`fully_shard`, DTensor parameters per module) shard the same model in incompatible ways, and
their profiler ranges differ (`FullyShardedDataParallel.*` against `FSDP::*`): a job that
builds both cannot be read as one FSDP2 job, and mixing them in one model is not supported by
torch. The script's own source is read (the file torchrun or python runs, not what it
imports), so the refusal comes before anything runs or is written.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from torchdoctor.collect._target import TORCHRUN_MODULES
from torchdoctor.core.errors import UsageError

#: The names each generation is built with, as a script refers to them.
FSDP1_NAMES: Final = frozenset({"FullyShardedDataParallel"})
FSDP2_NAMES: Final = frozenset({"fully_shard"})


def script_file(argv: Sequence[str], module: bool) -> Path | None:
    """The Python file a command runs: a script's own, or for a torchrun job the first `.py`
    word after torchrun's options; None for a module or a file that is not there."""
    if module and argv and argv[0] in TORCHRUN_MODULES:
        found = next((w for w in argv[1:] if w.endswith(".py")), None)
    elif not module and argv:
        found = argv[0]
    else:
        found = None
    path = Path(found) if found else None
    return path if path is not None and path.is_file() else None


def fsdp_generations(source: str) -> set[str]:
    """{"FSDP1", "FSDP2"}: the generations a script's source names (empty when none, or when
    it does not parse: Python then reports its own error when it runs)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.name.rsplit(".", 1)[-1])
    found = set()
    if names & FSDP1_NAMES:
        found.add("FSDP1")
    if names & FSDP2_NAMES:
        found.add("FSDP2")
    return found


def refuse_mixed_fsdp(argv: Sequence[str], module: bool) -> None:
    """Raise UsageError when the command's script builds both FSDP1 and FSDP2."""
    path = script_file(argv, module)
    if path is None:
        return
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return  # unreadable here: the run reports it
    if fsdp_generations(source) == {"FSDP1", "FSDP2"}:
        raise UsageError(
            f"{path} mixes FSDP1 (FullyShardedDataParallel) and FSDP2 (fully_shard), which "
            "shard parameters in incompatible ways",
            hint="shard with fully_shard only (torch.distributed.fsdp.fully_shard, per block "
            "and at the root), then diagnose again",
        )
