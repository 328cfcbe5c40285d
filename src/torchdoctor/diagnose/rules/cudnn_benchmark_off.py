"""cudnn_benchmark_off: convolutions with fixed shapes on CUDA without cudnn.benchmark."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding
from torchdoctor.diagnose.rules._common import compute_share
from torchdoctor.knobs import CUDNN_BENCHMARK

RULE_ID: Final = "cudnn_benchmark_off"
TITLE: Final = "cudnn.benchmark is off for fixed-shape convolutions"

#: Share of op time in convolutions from which autotuning matters.
MIN_CONV_SHARE: Final = 0.2
#: Assumed conv speedup from autotuned algorithms; cuDNN's heuristic choice is often within
#: 10-30% of the best (PyTorch performance tuning guide recommends benchmark=True for
#: fixed input sizes); 1.15 keeps the bound conservative.
AUTOTUNE_SPEEDUP: Final = 1.15


def check(ev: Evidence) -> Finding | None:
    if not ev.is_gpu or ev.config.cudnn_benchmark is not False or ev.trace is None:
        return None
    if ev.config.fixed_shapes is False or ev.trace.conv_time_frac < MIN_CONV_SHARE:
        return None
    base = compute_share(ev)
    if base is None:
        return None
    share = base * ev.trace.conv_time_frac
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"Convolutions take {ev.trace.conv_time_frac:.0%} of op time with "
        "cudnn.benchmark off.",
        bottleneck="compute",
        share=share,
        local_speedup=AUTOTUNE_SPEEDUP,
        evidence={"conv_op_time_share": round(ev.trace.conv_time_frac, 4)},
        prescription=Prescription(
            knobs={CUDNN_BENCHMARK.name: True},
            code_change="torch.backends.cudnn.benchmark = True (input shapes must be fixed)",
        ),
        confidence=0.6,
    )
