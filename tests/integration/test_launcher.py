"""run_script end to end: unmodified scripts in an instrumented child process (CPU)."""

from __future__ import annotations

import gzip
import json
import textwrap
from pathlib import Path

import pytest

from torchdoctor.collect import read_profiles
from torchdoctor.core.errors import CollectError
from torchdoctor.procs import run_script

ZOO = Path(__file__).resolve().parents[1] / "zoo"


def write_script(tmp_path: Path, body: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_manual_sgd_zoo_step_count(tmp_path: Path) -> None:
    profile = run_script(
        [str(ZOO / "framework_overhead_manual_sgd.py"), "12"],
        out_dir=tmp_path / "out",
        profile_steps=0,
    )
    assert profile.exit_code == 0
    assert profile.ended_by == "completed"
    assert profile.step_detection == "backward"
    assert profile.step_count == 12
    assert (tmp_path / "out" / "script_profile.json").is_file()


def test_sys_exit_code_passed_through_and_steps_kept(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        """
        import sys
        import torch
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
        sys.exit(3)
        """,
    )
    profile = run_script([str(script)], out_dir=tmp_path / "out", profile_steps=0)
    assert profile.exit_code == 3
    assert profile.ended_by == "sys_exit"
    assert profile.step_count == 3


def test_script_raising_before_first_step(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    script = write_script(
        tmp_path,
        """
        import torch

        def load_config():
            raise ValueError("bad config key 'lr'")

        load_config()
        """,
    )
    profile = run_script([str(script)], out_dir=tmp_path / "out", profile_steps=0)
    assert profile.exit_code == 1
    assert profile.ended_by == "exception"
    assert profile.steps == []
    assert profile.error is not None
    assert profile.error.startswith("ValueError: bad config key 'lr'")
    assert f"{script}:5 in load_config" in profile.error
    stderr = capfd.readouterr().err
    assert "Traceback" in stderr and "runpy" not in stderr  # the script's own traceback


def test_argparse_args_and_dataloader_info(tmp_path: Path) -> None:
    argv = [str(ZOO / "data_loading_argparse.py"), "--steps", "5", "--batch-size", "4"]
    profile = run_script([*argv, "--decode-iters", "2000"], out_dir=tmp_path / "out", warmup=1)
    assert profile.exit_code == 0
    assert profile.argv[:3] == argv[:3]
    assert profile.step_count == 5
    (loader,) = profile.dataloaders
    assert (loader.batch_size, loader.num_workers, loader.batches_fetched) == (4, 0, 5)
    assert all(s.phases["data_wait"] > 0 for s in profile.steps)


@pytest.mark.slow
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_with_workers(tmp_path: Path, context: str) -> None:
    argv = [str(ZOO / "compute_workers.py"), "--steps", "3", "--batch-size", "16"]
    profile = run_script(
        [*argv, "--workers", "2", "--mp-context", context],
        out_dir=tmp_path / "out",
        profile_steps=0,
    )
    assert profile.exit_code == 0, profile.error
    assert profile.step_count == 3
    (loader,) = profile.dataloaders
    assert (loader.num_workers, loader.multiprocessing_context) == (2, context)
    # only the main process writes a record: workers are not ranks
    assert [p.pid for p in read_profiles(tmp_path / "out")] == [profile.pid]


def test_profiled_window_and_max_steps(tmp_path: Path) -> None:
    out = tmp_path / "out"
    profile = run_script(
        [str(ZOO / "optimizer_trainer.py")], out_dir=out, steps=4, warmup=1, profile_steps=2
    )
    assert profile.exit_code == 0
    assert profile.ended_by == "max_steps"
    assert profile.step_count == 4
    assert profile.trace_path == str((out / "trace.json.gz").resolve())
    assert profile.trace_steps == [1, 2]
    events = json.loads(gzip.decompress(Path(profile.trace_path).read_bytes()))["traceEvents"]
    names = {e.get("name") for e in events}
    assert {"ProfilerStep#1", "ProfilerStep#2"} <= names
    assert any(str(n).startswith("Optimizer.step#Adam") for n in names)


def test_missing_script_is_a_collect_error(tmp_path: Path) -> None:
    with pytest.raises(CollectError, match=r"nope\.py' not found"):
        run_script([str(tmp_path / "nope.py")], out_dir=tmp_path / "out")


def test_syntax_error_is_a_collect_error(tmp_path: Path) -> None:
    script = write_script(tmp_path, "def broken(:\n    pass\n")
    with pytest.raises(CollectError, match="syntax error at line 1"):
        run_script([str(script)], out_dir=tmp_path / "out")


def test_missing_module_is_a_collect_error(tmp_path: Path) -> None:
    with pytest.raises(CollectError, match="no_such_training_module"):
        run_script(["no_such_training_module"], module=True, out_dir=tmp_path / "out")


@pytest.mark.slow
def test_torchrun_two_ranks_one_result_each(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        """
        import torch
        import torch.distributed as dist
        from torch import nn

        dist.init_process_group("gloo")
        model = nn.parallel.DistributedDataParallel(nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(3):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        dist.destroy_process_group()
        """,
        name="ddp_train.py",
    )
    out = tmp_path / "out"
    argv = ["torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script)]
    profile = run_script(argv, module=True, out_dir=out, warmup=1, profile_steps=1)
    assert profile.exit_code == 0
    assert profile.rank == 0
    ranks = [p for p in read_profiles(out) if p.rank is not None]
    assert [(p.rank, p.world_size, p.step_count) for p in ranks] == [(0, 2, 3), (1, 2, 3)]
    assert {Path(p.trace_path or "").name for p in ranks} == {
        "trace.rank0.json.gz",
        "trace.rank1.json.gz",
    }
