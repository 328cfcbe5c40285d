"""eval_without_no_grad: forward passes that record autograd graphs nobody uses."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding

RULE_ID: Final = "eval_without_no_grad"
TITLE: Final = "Evaluation runs with autograd enabled"

#: Assumed speedup of such a forward under inference_mode: it skips saving activations and
#: building the graph; 1.3x is a typical measured gain for small models (memory gain is larger).
LOCAL_SPEEDUP: Final = 1.3


def check(ev: Evidence) -> Finding | None:
    u = ev.usage
    if u is None or u.grad_forwards_without_backward == 0 or u.forward_calls == 0:
        return None
    wasted = u.grad_forwards_without_backward / u.forward_calls
    share = (ev.phase("forward") or 0.0) * wasted
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"{u.grad_forwards_without_backward} of {u.forward_calls} forward passes "
        "built an autograd graph that no backward used.",
        bottleneck="other_host",
        share=share,
        local_speedup=LOCAL_SPEEDUP,
        evidence={
            "grad_forwards_without_backward": u.grad_forwards_without_backward,
            "forward_calls": u.forward_calls,
            "eval_mode_grad_calls": u.eval_mode_grad_calls,
        },
        prescription=Prescription(
            code_change="wrap evaluation in `with torch.inference_mode():` (or torch.no_grad())"
        ),
        confidence=0.8,
    )
