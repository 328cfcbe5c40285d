"""A torchrun command as the tuner's arm (tune/torchrun.py): its options read, a rendezvous of
its own per arm, commands that cannot run as two arms refused in one line, the DDP knobs
offered to a torchrun job only; and a run's ranks that disagree on the recipe refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from torchdoctor.api import parse_command
from torchdoctor.collect.inject.record import InjectionRecord, KnobOutcome
from torchdoctor.collect.rank_agreement import check_ranks_agree
from torchdoctor.core.errors import CollectError, TuneError
from torchdoctor.tune import ScriptCommand
from torchdoctor.tune.api import _command_text, _space
from torchdoctor.tune.config import TuneConfig
from torchdoctor.tune.rescale import world_size_note
from torchdoctor.tune.torchrun import (
    arm_argv,
    check_tunable,
    ddp_knob_names,
    is_torchrun,
    job_script,
    job_world_size,
    torchrun_options,
)

DDP_KNOBS = {
    "bucket_cap_mb",
    "gradient_as_bucket_view",
    "static_graph",
    "find_unused_parameters",
    "ddp_comm_hook",
}


def test_the_cli_split_reads_as_a_torchrun_job() -> None:
    argv, module = parse_command(["torchrun", "--nproc_per_node", "2", "train.py", "--lr", "1"])
    assert is_torchrun(argv, module)
    assert not is_torchrun(*parse_command(["python", "train.py"]))
    assert not is_torchrun(*parse_command(["python", "-m", "pkg.train"]))
    assert torchrun_options(argv) == {"--nproc_per_node": "2"}
    # shown, and handed back for `run --recipe`, as the user typed it
    shown = "torchrun --nproc_per_node 2 train.py --lr 1"
    assert ScriptCommand(tuple(argv), module=module).display() == shown
    config = TuneConfig(workload="script:train", command=argv, module=module, search_batch=False)
    assert _command_text(config) == shown
    opts = torchrun_options(["torch.distributed.run", "--standalone", "--nnodes=1", "t.py", "-x"])
    assert opts == {"--standalone": None, "--nnodes": "1"}
    assert job_script(argv) == "train.py"
    assert (
        job_script(["torch.distributed.run", "--standalone", "--nnodes=1", "t.py", "-x"]) == "t.py"
    )
    assert job_script(["torch.distributed.run", "-m", "pkg.train"]) is None


def test_each_arm_gets_a_rendezvous_of_its_own() -> None:
    argv = ["torch.distributed.run", "--nproc_per_node", "2", "train.py", "--steps", "9"]
    assert arm_argv(argv) == ["torch.distributed.run", "--standalone", *argv[1:]]
    standalone = ["torch.distributed.run", "--standalone", "--nproc_per_node", "2", "t.py"]
    assert arm_argv(standalone) == standalone
    check_tunable(argv)  # nothing pinned: fine
    check_tunable(["torch.distributed.run", "--nnodes", "1", "t.py"])


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--master_port", "29500"], "pins its rendezvous (--master_port)"),
        (["--rdzv-endpoint=localhost:29400"], "pins its rendezvous (--rdzv-endpoint)"),
        (["--nnodes", "2"], "spans nodes (--nnodes 2)"),
        (["--nnodes=1:4"], "spans nodes (--nnodes 1:4)"),
    ],
)
def test_a_job_whose_arms_would_meet_is_refused(options: list[str], said: str) -> None:
    with pytest.raises(TuneError) as caught:
        check_tunable(["torch.distributed.run", *options, "--nproc_per_node", "2", "t.py"])
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_ddp_knobs_are_offered_to_a_torchrun_job_only() -> None:
    assert ddp_knob_names() == DDP_KNOBS
    argv, module = parse_command(["torchrun", "--nproc_per_node", "2", "train.py"])
    job = TuneConfig(workload="script:train", command=argv, module=module, search_batch=False)
    script = TuneConfig(workload="script:train", command=["train.py"], search_batch=False)
    workload = TuneConfig(workload="mlp")
    assert {s.name for s in _space(job)} >= DDP_KNOBS
    assert not DDP_KNOBS & {s.name for s in _space(script)}
    assert not DDP_KNOBS & {s.name for s in _space(workload)}


def _write(path: Path, knobs: list[tuple[str, Any, str]]) -> None:
    """An injection record as a rank writes it."""
    InjectionRecord(
        recipe={k: v for k, v, _ in knobs},
        knobs=[KnobOutcome(knob=k, value=v, status=s) for k, v, s in knobs],
    ).write(path)


def test_a_run_whose_ranks_disagree_is_one_line(tmp_path: Path) -> None:
    same = [("num_workers", 2, "applied"), ("static_graph", True, "applied")]
    for rank in (0, 1):
        _write(tmp_path / f"injection.rank{rank}.json", same)
    check_ranks_agree(tmp_path)  # one recipe on both ranks
    other = [("num_workers", 2, "not_applied"), ("static_graph", True, "applied")]
    _write(tmp_path / "injection.rank1.json", other)
    with pytest.raises(CollectError) as caught:
        check_ranks_agree(tmp_path)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(
        "the ranks of the torchrun job disagree on the recipe: rank 0 has num_workers=2 "
        "applied, rank 1 num_workers=2 not applied (every rank must build the same "
        "DataLoaders, optimizer and model)"
    )


def test_a_recipe_run_at_another_world_size_gets_the_learning_rate_note(tmp_path: Path) -> None:
    argv, module = parse_command(["torchrun", "--nproc_per_node", "2", "train.py"])
    assert job_world_size(argv) == 2
    assert job_world_size(["torch.distributed.run", "--nproc-per-node=auto", "t.py"]) is None
    config = TuneConfig(workload="script:train", command=argv, module=module, search_batch=False)
    config.write(tmp_path / "tune_config.json")
    assert world_size_note(tmp_path, 2, 32) is None  # the tuned world size
    note = world_size_note(tmp_path, 4, 32)
    assert note is not None and "32 x 2 = 64 to 32 x 4 = 128 samples" in note
    assert "\n" not in note and "scale the learning rate by 2" in note
    assert world_size_note(tmp_path / "elsewhere", 4, 32) is None  # no tune folder


def test_a_missing_script_is_one_line_before_any_launch(tmp_path: Path) -> None:
    from torchdoctor.tune.api import check_script_job

    argv, module = parse_command(["torchrun", "--nproc_per_node", "2", "nowhere.py"])
    config = TuneConfig(
        workload="script:nowhere",
        command=argv,
        module=module,
        cwd=str(tmp_path),
        search_batch=False,
    )
    with pytest.raises(TuneError, match=r"script 'nowhere\.py' not found"):
        check_script_job(config)
    (tmp_path / "nowhere.py").write_text("")
    check_script_job(config)
