"""Knobs are named and applied in `knobs/` only: the stages read the catalogue (each knob's parts
and attributes), and a rule's prescription (`diagnose/rules/`) is the one place outside the
package that names a knob. An AST scan of the source fails on code elsewhere that

- keeps its own list of knob names (a tuple, list, set or dict keys holding two or more knob
  names, as strings or as `KNOB.name`),
- looks a knob up by a string (a knob's name as a literal key, `get_knob` argument or compared
  value), or
- calls the torch API a knob applies through (torch.compile, autocast, GradScaler, CUDA graph
  capture, activation checkpointing, set_num_threads, the TF32 and cuDNN flags).

A string equal to a knob's name is not a knob reference where it is torch's own keyword the knob
is named after (`DataLoader(num_workers=...)`, `zero_grad(set_to_none=...)`): those are read
from torch's signatures. The few exceptions are listed below, each with why.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from fixture_knob import FLUSH_DENORMAL, TAG_MODEL
from torch.utils.data import DataLoader

import torchdoctor
import torchdoctor.knobs
from torchdoctor.knobs import Knob, catalogue, registered

SRC = Path(torchdoctor.__file__).parent
#: Where knobs are named: their package, and the rules whose prescriptions name them.
NAMING = ("knobs/", "diagnose/rules/")
#: The constants that declare the catalogue's knobs, as the package exports them.
CONSTANTS = {name for name, value in vars(torchdoctor.knobs).items() if isinstance(value, Knob)}


def _torch_keywords() -> frozenset[str]:
    """Parameter names of the torch calls knobs are named after."""
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel

    calls = (
        DataLoader.__init__,
        DistributedDataParallel.__init__,
        fully_shard,
        torch.optim.Optimizer.zero_grad,
    )
    names = {name for call in calls for name in inspect.signature(call).parameters}
    return frozenset(names | {"non_blocking"})  # Tensor.to's, a builtin without a signature


#: The torch API a knob applies through, by the dotted name it is called by.
APPLYING_CALLS = frozenset(
    {
        "torch.compile",
        "torch.autocast",
        "torch.amp.GradScaler",
        "torch.cuda.make_graphed_callables",
        "torch.utils.checkpoint.checkpoint",
        "torch.set_num_threads",
        "torch.set_float32_matmul_precision",
        "torch.set_flush_denormal",
    }
)
#: Flags a knob sets by assignment.
APPLYING_FLAGS = frozenset({"benchmark", "allow_tf32"})

#: (module, what it names) -> why it may. What it names: a knob name, "list", or a torch call.
ALLOWED: dict[tuple[str, str], str] = {
    ("analyze/ops.py", "tf32"): "TF32 as a kernel's math mode read from a trace, not the knob",
    ("measure/ceilings.py", "tf32"): "the TF32 matmul ceiling's name, measured apart",
    ("measure/ceilings.py", "allow_tf32"): "the TF32 ceiling is measured with TF32 on, and put "
    "back",
    ("report/adapters/serve.py", "list"): "a serve curve's axes, its record's fields (the "
    "batch size and thread count of a point), not the knobs",
    ("serve/variant_builds.py", "torch.autocast"): "an fp32 island turns autocast off inside a "
    "lower-precision model",
    ("tune/demo.py", "list"): "the demo's selection of knobs for its one small network, a choice "
    "about the demo",
    ("tune/api.py", "list"): "the values in force when threads and num_workers are unset (this "
    "process's thread count, the workload's workers)",
    ("tune/fit.py", "list"): "accumulation's step changes two knobs at once (the batch halved, "
    "the accumulation doubled)",
}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if not rel.startswith(NAMING):
            yield rel, ast.parse(path.read_text(encoding="utf-8"))


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _knob_reference(node: ast.expr | None, names: set[str], keywords: frozenset[str]) -> str:
    """The knob `node` names (a string literal, `KNOB.name` or `KNOB`), or ""."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if node.value in names - keywords else ""
    if isinstance(node, ast.Attribute) and node.attr == "name":
        node = node.value
    return node.id if isinstance(node, ast.Name) and node.id in CONSTANTS else ""


def offences(tree: ast.Module, names: set[str]) -> list[tuple[int, str]]:
    """(line, what it names) for each way `tree` names or applies a knob outside `knobs/`."""
    keywords = _torch_keywords()
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        elements: list[ast.expr | None] = []
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            elements = list(node.elts)
        elif isinstance(node, ast.Dict):
            elements = list(node.keys)
        if sum(1 for e in elements if _knob_reference(e, names, keywords)) >= 2:
            found.append((node.lineno, "list"))
        looked_up: list[ast.expr] = []
        if isinstance(node, ast.Subscript):
            looked_up = [node.slice]
        elif isinstance(node, ast.Compare):
            looked_up = [node.left, *node.comparators]
        elif isinstance(node, ast.Call):
            callee = _dotted(node.func)
            if callee in APPLYING_CALLS:
                found.append((node.lineno, callee))
            if callee.rsplit(".", 1)[-1] in ("get", "pop", "setdefault", "get_knob"):
                looked_up = node.args[:1]
        elif isinstance(node, ast.Assign):
            found += [
                (node.lineno, target.attr)
                for target in node.targets
                if isinstance(target, ast.Attribute) and target.attr in APPLYING_FLAGS
            ]
        for key in looked_up:
            if isinstance(key, ast.Constant) and _knob_reference(key, names, keywords):
                found.append((node.lineno, str(key.value)))
    return found


def test_no_code_outside_knobs_lists_looks_up_or_applies_a_knob() -> None:
    names = {k.name for k in catalogue()}
    unexpected = [
        f"{rel}:{line}: {what}"
        for rel, tree in _modules()
        for line, what in offences(tree, names)
        if (rel, what) not in ALLOWED
    ]
    assert unexpected == [], "read it from the catalogue (a knob's part or attribute) instead"


def test_every_exception_is_still_needed() -> None:
    names = {k.name for k in catalogue()}
    seen = {(rel, what) for rel, tree in _modules() for _, what in offences(tree, names)}
    assert set(ALLOWED) <= seen, "drop the exceptions nothing needs any more"


@pytest.mark.parametrize(
    ("code", "what"),
    [
        ("STEPS = (COMPILE.name, PRECISION.name)", "list"),
        ('KNOBS = ["compile", "channels_last"]', "list"),
        ('{"precision": 1, "compile": 2}', "list"),
        ('recipe["precision"]', "precision"),
        ('settings.get("compile", "off")', "compile"),
        ('get_knob("channels_last")', "channels_last"),
        ('value == "tag_model"', "tag_model"),
        ("torch.compile(model)", "torch.compile"),
        ("torch.backends.cudnn.benchmark = True", "benchmark"),
    ],
)
def test_the_scan_finds_a_knob_named_or_applied_outside_knobs(code: str, what: str) -> None:
    with registered(TAG_MODEL):
        names = {k.name for k in catalogue()}
    assert [w for _, w in offences(ast.parse(code), names)] == [what]


@pytest.mark.parametrize(
    "code",
    [
        "DataLoader(data, num_workers=2, pin_memory=True)",
        'kwargs.get("set_to_none", True)',
        'arguments.get("batch_size")',
        "recipe[PRECISION.name]",  # one knob by its constant: the seam of a stage's own
        '"compile" + suffix',
    ],
)
def test_the_scan_leaves_torch_keywords_and_single_constants(code: str) -> None:
    names = {k.name for k in (*catalogue(), FLUSH_DENORMAL)}
    assert offences(ast.parse(code), names) == []
