"""Which FSDP a script names (collect/fsdp_source.py): read from its source, the script found
in a plain or a torchrun command."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchdoctor.collect.fsdp_source import fsdp_generations, refuse_mixed_fsdp, script_file
from torchdoctor.core.errors import UsageError

ZOO = Path(__file__).resolve().parents[2] / "zoo"


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("from torch.distributed.fsdp import fully_shard\nfully_shard(m)", {"FSDP2"}),
        ("import torch.distributed.fsdp as F\nF.FullyShardedDataParallel(m)", {"FSDP1"}),
        (
            "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard",
            {"FSDP1", "FSDP2"},
        ),
        ("model = nn.parallel.DistributedDataParallel(m)", set()),
        ("def broken(:", set()),  # Python reports it when the script runs
    ],
)
def test_the_generations_a_source_names(source: str, found: set[str]) -> None:
    assert fsdp_generations(source) == found


def test_the_script_of_a_command() -> None:
    zoo = str(ZOO / "fsdp2_train.py")
    torchrun = ["torch.distributed.run", "--nproc_per_node", "2", zoo, "--plant", "reshard"]
    assert script_file(torchrun, module=True) == Path(zoo)
    assert script_file([zoo, "--steps", "3"], module=False) == Path(zoo)
    assert script_file(["pkg.train"], module=True) is None
    assert script_file(["missing.py"], module=False) is None


def test_only_a_mix_is_refused(tmp_path: Path) -> None:
    refuse_mixed_fsdp([str(ZOO / "fsdp2_train.py")], module=False)  # FSDP2 alone
    mixed = tmp_path / "mixed.py"
    mixed.write_text("from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard\n")
    with pytest.raises(UsageError, match="mixes FSDP1"):
        refuse_mixed_fsdp([str(mixed)], module=False)
