"""A user's script as a torchrun rank: `torchrun ... -m torchdoctor.scale._rank_script
train.py ARGS`. It records what DDP reduces (`_ddp_params`) and what FSDP2 shards
(`_fsdp_units`), and then runs the script as
`python train.py ARGS` would (`__main__`, argv, sys.path[0])."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

from torchdoctor.scale._ddp_params import record_ddp_parameters
from torchdoctor.scale._fsdp_units import record_fsdp_units
from torchdoctor.scale._rank_bench import bench_if_asked


def main() -> None:
    script, *args = sys.argv[1:]
    bench_if_asked()  # before the job, in a group of its own
    record_ddp_parameters()
    record_fsdp_units()
    sys.argv = [script, *args]
    sys.path[0] = str(Path(script).resolve().parent)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
