"""The FSDP knobs as the tuner offers them (tune/torchrun.py): to a torchrun job whose source
calls fully_shard only, with the resharding groups its ranks allow; asked for by name on any
other command, one line and exit 2 before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_output import one_error_line
from torchdoctor.api import parse_command
from torchdoctor.cli.main import main
from torchdoctor.core.errors import TuneError
from torchdoctor.knobs import (
    FSDP_CPU_OFFLOAD,
    FSDP_MIXED_PRECISION,
    FSDP_PREFETCH,
    FSDP_WRAP,
    RESHARD_AFTER_FORWARD,
)
from torchdoctor.tune.api import _space
from torchdoctor.tune.config import TuneConfig
from torchdoctor.tune.torchrun import calls_fully_shard, check_fsdp_knobs, fsdp_knob_names

FSDP_KNOBS = {k.name for k in (RESHARD_AFTER_FORWARD, FSDP_MIXED_PRECISION, FSDP_PREFETCH)}
SHARDS = "from torch.distributed.fsdp import fully_shard\nfully_shard(model)\n"
PLAIN = "import torch\nmodel = torch.nn.Linear(2, 2)\n"
#: where a job's sharding is built in a module beside the script
SHARDS_BESIDE = "import torch.distributed.fsdp as fsdp\nfsdp.fully_shard(model)\n"


def _config(tmp_path: Path, words: list[str], **kwargs: object) -> TuneConfig:
    argv, module = parse_command(words)
    return TuneConfig(
        workload="script:train",
        command=argv,
        module=module,
        search_batch=False,
        cwd=str(tmp_path),
        **kwargs,  # type: ignore[arg-type]
    )


def test_fsdp_knobs_are_offered_where_a_torchrun_job_calls_fully_shard(tmp_path: Path) -> None:
    assert fsdp_knob_names() == {*FSDP_KNOBS, FSDP_CPU_OFFLOAD.name, FSDP_WRAP.name}
    (tmp_path / "train.py").write_text(SHARDS)
    (tmp_path / "plain.py").write_text(PLAIN)
    job = _config(tmp_path, ["torchrun", "--nproc-per-node", "2", "train.py"])
    assert {s.name for s in _space(job)} >= FSDP_KNOBS
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    (elsewhere / "plain.py").write_text(PLAIN)
    unsharded = _config(elsewhere, ["torchrun", "--nproc-per-node", "2", "plain.py"])
    assert not FSDP_KNOBS & {s.name for s in _space(unsharded)}
    script = _config(tmp_path, ["python", "train.py"])
    assert not FSDP_KNOBS & {s.name for s in _space(script)}
    assert not FSDP_KNOBS & {s.name for s in _space(TuneConfig(workload="mlp"))}


def test_a_module_beside_the_script_that_shards_counts(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(PLAIN)
    assert not calls_fully_shard(tmp_path / "train.py")
    package = tmp_path / "model"
    package.mkdir()
    (package / "parallel.py").write_text(SHARDS_BESIDE)
    assert calls_fully_shard(tmp_path / "train.py")


@pytest.mark.parametrize(("ranks", "groups"), [(2, []), (4, [2]), (8, [2, 4])])
def test_only_the_resharding_groups_that_divide_the_ranks_are_tried(
    tmp_path: Path, ranks: int, groups: list[int]
) -> None:
    (tmp_path / "train.py").write_text(SHARDS)
    job = _config(tmp_path, ["torchrun", "--nproc-per-node", str(ranks), "train.py"])
    (spec,) = [s for s in _space(job) if s.name == RESHARD_AFTER_FORWARD.name]
    assert list(spec.values) == [True, False, *groups]


def test_an_fsdp_knob_on_a_job_that_cannot_take_it_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text(PLAIN)
    asked = [FSDP_MIXED_PRECISION.name]
    with pytest.raises(TuneError, match="no torchrun job"):
        check_fsdp_knobs(asked, ["plain.py"], False, str(tmp_path))
    torchrun, module = parse_command(["torchrun", "--nproc-per-node", "2", "plain.py"])
    with pytest.raises(TuneError, match="never calls fully_shard"):
        check_fsdp_knobs(asked, torchrun, module, str(tmp_path))
    check_fsdp_knobs(["threads"], torchrun, module, str(tmp_path))  # no FSDP knob asked


def test_the_cli_refuses_it_in_one_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "plain.py"
    script.write_text(PLAIN)
    run = tmp_path / "tune"
    words = ["torchrun", "--nproc-per-node", "2", str(script)]
    code = main(["tune", "--knobs", FSDP_PREFETCH.name, "--out", str(run), "--", *words])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2
    assert "never calls fully_shard" in line
    assert not run.exists()  # bad input, said before any run folder exists
