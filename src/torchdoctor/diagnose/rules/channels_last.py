"""channels_last: a convolutional net run in the default NCHW (contiguous) memory format."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding
from torchdoctor.diagnose.rules._common import compute_share
from torchdoctor.knobs import CHANNELS_LAST

RULE_ID: Final = "channels_last"
TITLE: Final = "Convolutions in NCHW (try channels_last)"

#: Share of operator time in convolutions from which the memory format matters.
MIN_CONV_SHARE: Final = 0.2
#: Assumed conv speedup from NHWC: the PyTorch "Channels Last Memory Format" tutorial reports
#: 8-35% on Volta/Ampere convnets; cuDNN and oneDNN both prefer NHWC. 1.2 is mid-range.
CHANNELS_LAST_SPEEDUP: Final = 1.2
CONV_KINDS: Final = ("cnn", "vision", "conv")


def check(ev: Evidence) -> Finding | None:
    if ev.config.channels_last:
        return None
    conv = ev.trace.conv_time_frac if ev.trace is not None else None
    is_cnn = (ev.workload_kind or "").lower() in CONV_KINDS
    if conv is None and not is_cnn:
        return None
    if conv is not None and conv < MIN_CONV_SHARE:
        return None
    base = compute_share(ev)
    if base is None:
        return None
    conv_share = conv if conv is not None else 1.0
    # Unknown format (no recipe says it): the trace cannot show strides, so lower confidence.
    known = ev.config.channels_last is False
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=(
            f"Convolutions take {conv_share:.0%} of operator time"
            + (
                " in NCHW format."
                if known
                else "; the memory format is not channels_last as far as seen."
            )
        ),
        bottleneck="compute",
        share=base * conv_share,
        local_speedup=CHANNELS_LAST_SPEEDUP,
        evidence={"conv_op_time_share": round(conv_share, 4), "channels_last_known": known},
        prescription=Prescription(
            knobs={CHANNELS_LAST.name: True},
            code_change=(
                "model = model.to(memory_format=torch.channels_last); "
                "x = x.to(memory_format=torch.channels_last)"
            ),
        ),
        confidence=0.6 if known else 0.4,
    )
