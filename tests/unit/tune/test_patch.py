"""tune/patch.py: the recipe written into the user's source as a unified diff that `patch -p1`
applies, and snippets for the knobs with no line to edit."""

from __future__ import annotations

import ast
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from torchdoctor.collect.inject.record import InjectionRecord, KnobOutcome
from torchdoctor.tune.patch import build_patch, parse_site


def _write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def _record(
    recipe: dict[str, Any], applied_at: dict[str, list[str]], **extra: Any
) -> InjectionRecord:
    knobs = [
        KnobOutcome(knob=k, value=v, status="applied", applied_at=applied_at.get(k, []))
        for k, v in recipe.items()
    ]
    return InjectionRecord(recipe=recipe, knobs=knobs, **extra)


def _line(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def _apply(root: Path, diff: str) -> None:
    """Apply with the `patch` binary as a user would (-p1 in the root), else by hand."""
    if shutil.which("patch") is None:
        pytest.skip("the patch binary is not installed")
    done = subprocess.run(
        ["patch", "-p1", "--batch"], input=diff, text=True, cwd=root, capture_output=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _call(path: Path, name: str) -> ast.Call:
    tree = ast.parse(path.read_text())
    return next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (getattr(n.func, "id", None) == name or getattr(n.func, "attr", None) == name)
    )


def _keywords(call: ast.Call) -> dict[str, Any]:
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}


def test_parse_site_takes_the_last_at() -> None:
    root = Path("/r")
    assert parse_site("the script's set_num_threads(1) kept at 2 at /r/t.py:9", root) == (
        Path("/r/t.py"),
        9,
    )
    assert parse_site("torch.set_num_threads(2) at start (was 4)", root) is None
    assert parse_site("DataLoader num_workers 0 -> 2 at t.py:3", root) == (Path("/r/t.py"), 3)


def test_dataloader_existing_keyword_replaced_and_new_ones_added(tmp_path: Path) -> None:
    script = _write(
        tmp_path,
        "train.py",
        """
        from torch.utils.data import DataLoader
        data = list(range(8))
        loader = DataLoader(data, batch_size=4, num_workers=args.workers)  # keep me
        print("after")
        """,
    )
    line = _line(script, "DataLoader(data")
    recipe = {"num_workers": 2, "pin_memory": True}
    record = _record(
        recipe,
        {
            "num_workers": [f"DataLoader num_workers 0 -> 2 at {script}:{line}"],
            "pin_memory": [f"DataLoader pin_memory false -> true at {script}:{line}"],
        },
    )
    result = build_patch(recipe, record, tmp_path, script=script)
    assert "--- a/train.py" in result.diff and "+++ b/train.py" in result.diff
    _apply(tmp_path, result.diff)
    text = script.read_text()
    # only the call's arguments changed: the comment and the other lines are kept
    assert (
        "loader = DataLoader(data, batch_size=4, num_workers=2, pin_memory=True)  # keep me" in text
    )
    assert text.count("\n") == 4
    assert {e.knob for e in result.edits} == {"num_workers", "pin_memory"}
    assert result.snippets == []


def test_dataloader_positional_argument_replaced(tmp_path: Path) -> None:
    script = _write(
        tmp_path,
        "t.py",
        """
        import torch
        loader = torch.utils.data.DataLoader(ds, 8, True, None, None, 0)
        """,
    )
    recipe = {"num_workers": 3, "batch_size": 16}
    record = _record(
        recipe,
        {
            "num_workers": [f"x at {script}:2"],
            "batch_size": [f"x at {script}:2"],
        },
    )
    _apply(tmp_path, build_patch(recipe, record, tmp_path).diff)
    assert "DataLoader(ds, 16, True, None, None, 3)" in script.read_text()


def test_dataloader_multiline_call_keeps_one_argument_per_line(tmp_path: Path) -> None:
    script = _write(
        tmp_path,
        "t.py",
        """
        from torch.utils.data import DataLoader


        def make(ds):
            return DataLoader(
                ds,
                batch_size=32,
                shuffle=True,
            )
        """,
    )
    recipe = {"num_workers": 4, "persistent_workers": True}
    # the line the frame reports for a multi-line call may be any line of its span
    record = _record(
        recipe,
        {"num_workers": [f"x at {script}:6"], "persistent_workers": [f"x at {script}:7"]},
    )
    result = build_patch(recipe, record, tmp_path)
    _apply(tmp_path, result.diff)
    assert script.read_text().endswith(
        "        ds,\n"
        "        batch_size=32,\n"
        "        shuffle=True,\n"
        "        num_workers=4,\n"
        "        persistent_workers=True,\n"
        "    )\n"
    )
    ast.parse(script.read_text())


def test_dataloader_with_double_star_kwargs_is_a_snippet(tmp_path: Path) -> None:
    script = _write(tmp_path, "t.py", "loader = DataLoader(ds, **opts)\n")
    recipe = {"num_workers": 2}
    record = _record(recipe, {"num_workers": [f"x at {script}:1"]})
    result = build_patch(recipe, record, tmp_path)
    assert result.diff == ""
    assert [s.knob for s in result.snippets] == ["num_workers"]
    assert "**kwargs" in result.snippets[0].where


def test_optimizer_gets_fused_and_foreach_replaced(tmp_path: Path) -> None:
    script = _write(
        tmp_path,
        "t.py",
        """
        import torch
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
        """,
    )
    recipe = {"optimizer_impl": "fused"}
    record = _record(
        recipe, {"optimizer_impl": [f"AdamW(foreach=true, fused=None) -> fused at {script}:2"]}
    )
    _apply(tmp_path, build_patch(recipe, record, tmp_path).diff)
    assert _keywords(_call(script, "AdamW")) == {"lr": 1e-3, "foreach": False, "fused": True}


def test_zero_grad_set_to_none(tmp_path: Path) -> None:
    script = _write(tmp_path, "t.py", "opt.zero_grad(set_to_none=True)\n")
    recipe = {"set_to_none": False}
    record = _record(
        recipe, {"set_to_none": [f"zero_grad(set_to_none=true) -> false at {script}:1"]}
    )
    _apply(tmp_path, build_patch(recipe, record, tmp_path).diff)
    assert script.read_text() == "opt.zero_grad(set_to_none=False)\n"


def test_compile_and_channels_last_after_the_model_assignment(tmp_path: Path) -> None:
    script = _write(
        tmp_path,
        "t.py",
        """
        from torch import nn


        def main():
            criterion = nn.CrossEntropyLoss()
            net = nn.Sequential(
                nn.Conv2d(3, 8, 3),
            )
            for x, y in batches:
                loss = criterion(net(x), y)
        """,
    )
    call_line = _line(script, "criterion(net(x)")
    recipe = {"compile": "max-autotune", "channels_last": True}
    record = _record(
        recipe,
        {
            "compile": [
                f"Sequential.forward = torch.compile(mode=max-autotune) at {script}:{call_line}"
            ],
            "channels_last": [
                f"Sequential and its 4-D inputs channels_last at {script}:{call_line}"
            ],
        },
        model="Sequential",
    )
    result = build_patch(recipe, record, tmp_path)
    _apply(tmp_path, result.diff)
    text = script.read_text()
    assert text.startswith("from torch import nn\nimport torch\n")
    assert (
        "    )\n"
        "    net = net.to(memory_format=torch.channels_last)\n"
        "    net = torch.compile(net, mode='max-autotune')\n"
        "    for x, y in batches:\n"
    ) in text
    # the inputs' conversion has no line of its own: a snippet says where
    assert [s.knob for s in result.snippets] == ["channels_last"]


def test_model_without_recorded_location_is_a_snippet(tmp_path: Path) -> None:
    _write(tmp_path, "t.py", "model = Net()\n")
    recipe = {"compile": "default"}
    record = _record(recipe, {"compile": ["Net.forward = torch.compile(mode=default)"]})
    result = build_patch(recipe, record, tmp_path)
    assert result.diff == ""
    assert [(s.knob, s.code) for s in result.snippets] == [
        ("compile", "model = torch.compile(model)")
    ]


def test_threads_inserted_after_imports_or_replacing_the_scripts_own(tmp_path: Path) -> None:
    script = _write(
        tmp_path,
        "t.py",
        '''
        """doc"""
        import os
        from torch import nn
        x = 1
        ''',
    )
    recipe = {"threads": 4}
    record = _record(recipe, {"threads": ["torch.set_num_threads(4) at start (was 2)"]})
    _apply(tmp_path, build_patch(recipe, record, tmp_path, script="t.py").diff)
    assert script.read_text() == (
        '"""doc"""\nimport os\nfrom torch import nn\nimport torch\n'
        "torch.set_num_threads(4)\nx = 1\n"
    )

    own = _write(tmp_path, "own.py", "import torch\ntorch.set_num_threads(1)\n")
    record = _record(
        recipe,
        {
            "threads": [
                "torch.set_num_threads(4) at start (was 2)",
                f"the script's set_num_threads(1) kept at 4 at {own}:2",
            ]
        },
    )
    _apply(tmp_path, build_patch(recipe, record, tmp_path, script="own.py").diff)
    assert own.read_text() == "import torch\ntorch.set_num_threads(4)\n"


def test_autocast_and_unrecorded_knobs_are_snippets(tmp_path: Path) -> None:
    recipe = {"precision": "bf16", "checkpointing": True, "num_workers": 2}
    record = _record(
        recipe,
        {"precision": ["Net.forward under torch.autocast('cpu', torch.bfloat16)"]},
        device_type="cpu",
    )
    result = build_patch(recipe, record, tmp_path)
    assert result.diff == ""
    by_knob = {s.knob: s for s in result.snippets}
    assert set(by_knob) == {"precision", "checkpointing", "num_workers"}
    assert "torch.autocast('cpu', dtype=torch.bfloat16)" in by_knob["precision"].code
    assert "forward" in by_knob["precision"].where
    assert "GradScaler" not in by_knob["precision"].code


def test_only_applied_knobs_are_written(tmp_path: Path) -> None:
    script = _write(tmp_path, "t.py", "loader = DataLoader(ds)\n")
    recipe = {"num_workers": 2}
    record = InjectionRecord(
        recipe=recipe,
        knobs=[KnobOutcome(knob="num_workers", value=2, status="not_applied", reason="none")],
    )
    result = build_patch(recipe, record, tmp_path, script=script)
    assert result.diff == "" and result.edits == [] and result.snippets == []


def test_model_built_in_branches_is_compiled_before_the_training_loop(tmp_path: Path) -> None:
    # nanoGPT's shape: the model is built in one of several branches and re-wrapped under
    # `if ddp:`; no single assignment always runs, so the line goes before the loop.
    script = _write(
        tmp_path,
        "t.py",
        """
        if scratch:
            model = GPT(conf)
        else:
            model = GPT.load(path)
        if ddp:
            model = DDP(model)
        while True:
            with ctx:
                logits, loss = model(X, Y)
        """,
    )
    call_line = _line(script, "model(X, Y)")
    recipe = {"compile": "default"}
    record = _record(
        recipe,
        {"compile": [f"GPT.forward = torch.compile(mode=default) at {script}:{call_line}"]},
        model="GPT",
    )
    _apply(tmp_path, build_patch(recipe, record, tmp_path).diff)
    assert "    model = DDP(model)\nmodel = torch.compile(model)\nwhile True:\n" in (
        script.read_text()
    )


def test_unconditional_assignment_wins_over_a_later_branch(tmp_path: Path) -> None:
    script = _write(
        tmp_path,
        "t.py",
        """
        import torch
        model = Net()
        if ddp:
            model = DDP(model)
        for x in data:
            model(x).sum().backward()
        """,
    )
    recipe = {"compile": "reduce-overhead"}
    record = _record(recipe, {"compile": [f"x at {script}:6"]}, model="Net")
    _apply(tmp_path, build_patch(recipe, record, tmp_path).diff)
    assert script.read_text().startswith(
        "import torch\nmodel = Net()\nmodel = torch.compile(model, mode='reduce-overhead')\n"
    )


def test_a_call_that_already_has_the_value_is_left_alone(tmp_path: Path) -> None:
    script = _write(tmp_path, "t.py", "loader = DataLoader(ds, num_workers=2)\n")
    recipe = {"num_workers": 2}
    record = _record(recipe, {"num_workers": [f"DataLoader num_workers 2 -> 2 at {script}:1"]})
    result = build_patch(recipe, record, tmp_path)
    assert result.diff == "" and result.edits == [] and result.snippets == []


def test_file_without_final_newline_patches_cleanly(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text("x = 1\nloader = DataLoader(ds)", encoding="utf-8")
    recipe = {"num_workers": 2}
    record = _record(recipe, {"num_workers": [f"x at {script}:2"]})
    result = build_patch(recipe, record, tmp_path)
    assert "\\ No newline at end of file" in result.diff
    _apply(tmp_path, result.diff)
    assert script.read_text() == "x = 1\nloader = DataLoader(ds, num_workers=2)"
