"""The gradient bytes a DDP job reduces, recorded where the model is wrapped.

The scaling model needs the sizes of the parameters DDP buckets (`buckets.ddp_buckets`), and a
user's script does not say them. Each rank program here wraps `DistributedDataParallel.__init__`
so that rank 0 writes the sizes of the trainable parameters of every model it wraps, with the
bucket cap it was given, into the run folder (`PARAMS_FILE`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

#: Where a rank program finds the run folder.
OUT_ENV: Final = "TORCHDOCTOR_SCALE_OUT"
PARAMS_FILE: Final = "ddp_params.json"


def record_ddp_parameters() -> None:
    """Patch DDP in this process (a rank); rank 0 writes what each wrapped model reduces."""
    out = os.environ.get(OUT_ENV)
    if not out or os.environ.get("RANK", "0") != "0":
        return
    from torch.nn.parallel import DistributedDataParallel

    original = DistributedDataParallel.__init__
    seen: list[dict[str, Any]] = []

    def init(self: Any, module: Any, *args: Any, **kwargs: Any) -> None:
        original(self, module, *args, **kwargs)
        sizes = [p.numel() * p.element_size() for p in module.parameters() if p.requires_grad]
        seen.append({"param_bytes": sizes, "bucket_cap_mb": kwargs.get("bucket_cap_mb")})
        Path(out, PARAMS_FILE).write_text(json.dumps({"models": seen}), encoding="utf-8")

    DistributedDataParallel.__init__ = init  # type: ignore[method-assign]


def read_ddp_parameters(run_dir: Path) -> tuple[list[int], float | None] | None:
    """(parameter bytes of every wrapped model, the first one's bucket cap), or None when the
    job wrapped no model in DDP."""
    path = run_dir / PARAMS_FILE
    if not path.is_file():
        return None
    models = json.loads(path.read_text(encoding="utf-8"))["models"]
    sizes = [b for m in models for b in m["param_bytes"]]
    return sizes, models[0].get("bucket_cap_mb") if models else None
