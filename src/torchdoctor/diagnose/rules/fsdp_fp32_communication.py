"""fsdp_fp32_communication: FSDP collectives in fp32 where a bf16 policy would halve them."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import LOW_SHARE, Finding, Prescription, make_finding
from torchdoctor.knobs import FSDP_MIXED_PRECISION

RULE_ID: Final = "fsdp_fp32_communication"
TITLE: Final = "fp32 communication (FSDP)"

#: The knob that sets fully_shard's MixedPrecisionPolicy (knobs/fsdp.py).
#: The fp32 collectives' exposed share from which the rule fires: the low-severity share
#: (findings.LOW_SHARE), since the cure is one argument.
MIN_SHARE: Final = LOW_SHARE
#: Half the bytes: a collective limited by bandwidth takes at most half as long in bf16 (its
#: latency term does not shrink, so this is an upper bound on the local speedup).
BF16_SPEEDUP: Final = 2.0
_FP32: Final = "float32"


def check(ev: Evidence) -> Finding | None:
    f = ev.fsdp
    if f is None or not f.units:
        return None
    gathers = [u for u in f.units if u.param_dtype == _FP32]
    reduces = [u for u in f.units if u.reduce_dtype == _FP32]
    if not gathers and not reduces:
        return None
    exposed_ms = min(
        f.exposed_comm_ms,
        sum(u.forward_exposed_ms + u.backward_exposed_ms for u in gathers)
        + sum(u.reduce_scatter_exposed_ms for u in reduces),
    )
    share = f.share(exposed_ms)
    if share < MIN_SHARE:
        return None
    low_params = [u for u in reduces if u.param_dtype not in (None, _FP32)]
    what = []
    if gathers:
        what.append(f"all-gathers parameters of {len(gathers)} units in fp32")
    if reduces:
        what.append(f"reduce-scatters gradients of {len(reduces)} units in fp32")
        if low_params:
            what[-1] += f" (computed in {low_params[0].param_dtype})"
    fp32_bytes = sum(int(u.unsharded_bytes or 0) for u in gathers) + sum(
        int(u.reduce_bytes or 0) for u in reduces
    )
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"the job {' and '.join(what)}: {fp32_bytes / 2**20:.1f} MiB per step whose "
        f"transfer leaves {exposed_ms:.1f} ms exposed ({share:.0%} of the step); a bf16 "
        "MixedPrecisionPolicy would move half the bytes.",
        bottleneck="communication",
        share=share,
        local_speedup=BF16_SPEEDUP,
        evidence={
            "fp32_all_gather_units": len(gathers),
            "fp32_reduce_units": len(reduces),
            "fp32_bytes_per_step": fp32_bytes,
            "exposed_fp32_ms": round(exposed_ms, 3),
            "param_dtype": (low_params[0].param_dtype if low_params else _FP32),
        },
        prescription=Prescription(
            knobs={FSDP_MIXED_PRECISION.name: "bf16"},
            code_change="fully_shard(..., mp_policy=MixedPrecisionPolicy("
            "param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)): bf16 all-gathers and "
            "reduce-scatters; a bf16 reduce sums the ranks' gradients in bf16, so check the "
            "loss stays on course (torchdoctor tune checks it)",
        ),
        # The bytes are read from the collectives' recorded dtypes; how much of the exposed
        # time is bandwidth rather than latency the trace does not tell.
        confidence=0.6,
    )
