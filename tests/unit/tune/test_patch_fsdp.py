"""tune/patch.py on a sharded job: the FSDP knobs written into the `fully_shard(...)` calls the
injection acted at (the blocks' only, for reshard_after_forward; every call, for the mixed
precision policy), with the import the policy needs, and prefetching as a snippet; the unit
of wrapping of a root-only script as a snippet of the loop over the blocks."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from test_patch import _apply, _record

from torchdoctor.knobs import (
    FSDP_MIXED_PRECISION,
    FSDP_PREFETCH,
    FSDP_WRAP,
    RESHARD_AFTER_FORWARD,
)
from torchdoctor.tune.patch import build_patch

SCRIPT = """
import torch
from torch.distributed.fsdp import fully_shard

model = Net()
for block in model.blocks:
    fully_shard(block)
fully_shard(model, reshard_after_forward=None)
"""


def _calls(path: Path) -> list[dict[str, str]]:
    """The keywords of each fully_shard call, in the order of the file."""
    tree = ast.parse(path.read_text())
    calls = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Call)),
        key=lambda n: n.lineno,
    )
    return [
        {k.arg: ast.unparse(k.value) for k in n.keywords if k.arg}
        for n in calls
        if getattr(n.func, "id", None) == "fully_shard"
    ]


def test_fsdp_knobs_are_written_into_the_fully_shard_calls(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT).lstrip("\n"), encoding="utf-8")
    recipe = {
        RESHARD_AFTER_FORWARD.name: False,
        FSDP_MIXED_PRECISION.name: "bf16_fp32_reduce",
        FSDP_PREFETCH.name: 2,
    }
    block, root = f"{script}:6", f"{script}:7"
    record = _record(
        recipe,
        {
            RESHARD_AFTER_FORWARD.name: [f"fully_shard(reshard_after_forward=false) at {block}"],
            FSDP_MIXED_PRECISION.name: [
                f"fully_shard(mp_policy=bf16_fp32_reduce) at {block}",
                f"fully_shard(mp_policy=bf16_fp32_reduce) at {root}",
            ],
            FSDP_PREFETCH.name: [f"prefetch 2 blocks ahead of this block at {block}"],
        },
    )
    patch = build_patch(recipe, record, tmp_path, script=script)
    _apply(tmp_path, patch.diff)
    policy = "MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)"
    assert _calls(script) == [
        {"reshard_after_forward": "False", "mp_policy": policy},
        {"reshard_after_forward": "None", "mp_policy": policy},
    ]
    text = script.read_text()
    assert "from torch.distributed.fsdp import MixedPrecisionPolicy\n" in text
    compile(text, str(script), "exec")
    (prefetch,) = patch.snippets
    assert prefetch.knob == FSDP_PREFETCH.name
    assert "set_modules_to_forward_prefetch(blocks[i + 1 : i + 1 + 2])" in prefetch.code
    assert {e.knob for e in patch.edits} == {RESHARD_AFTER_FORWARD.name, FSDP_MIXED_PRECISION.name}


ROOT_ONLY = """
from torch.distributed.fsdp import fully_shard

model = Net()
fully_shard(model)
"""


def test_the_unit_of_wrapping_is_a_snippet_of_the_loop_over_the_blocks(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(ROOT_ONLY).lstrip("\n"), encoding="utf-8")
    recipe = {FSDP_WRAP.name: "block"}
    at = f"fully_shard(model.layers[i]) for 3 Block blocks, before the root's at {script}:4"
    patch = build_patch(recipe, _record(recipe, {FSDP_WRAP.name: [at]}), tmp_path, script=script)
    assert not patch.edits  # no line of the script is the loop: it is pasted
    (wrap,) = patch.snippets
    assert wrap.knob == FSDP_WRAP.name and "fully_shard(model)" in wrap.where
    loop = "for block in model.layers:\n    fully_shard(block)\nfully_shard(model)"
    assert wrap.code.endswith(loop)
    compile(wrap.code, "snippet", "exec")
