"""compile_graph_breaks: torch.compile split the model into pieces or keeps recompiling."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding
from torchdoctor.diagnose.rules._common import compute_share
from torchdoctor.knobs import COMPILE_DYNAMIC

RULE_ID: Final = "compile_graph_breaks"
TITLE: Final = "torch.compile graph breaks or recompiles"

#: Recompiles from which shapes are clearly changing: torch._dynamo's cache_size_limit is 8,
#: after which it stops compiling the frame; a few recompiles are normal (first dynamic shape).
MIN_RECOMPILES: Final = 2
#: Assumed speedup of the compiled region once whole: each break returns to eager Python
#: and ends a fusion region; 1.2x is a conservative figure.
WHOLE_GRAPH_SPEEDUP: Final = 1.2


def check(ev: Evidence) -> Finding | None:
    c = ev.compile
    if c is None or (c.graph_breaks == 0 and c.recompiles < MIN_RECOMPILES):
        return None
    base = compute_share(ev) or 0.0
    knobs: dict[str, int | bool | str | None] = {}
    words = []
    if c.graph_breaks:
        words.append(
            "remove graph breaks (see TORCH_LOGS=graph_breaks): data-dependent "
            "Python control flow, .item(), print, unsupported calls"
        )
    if c.recompiles >= MIN_RECOMPILES:
        knobs[COMPILE_DYNAMIC.name] = True
        words.append("mark changing dimensions dynamic or pad shapes (TORCH_LOGS=recompiles)")
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=f"torch.compile saw {c.graph_breaks} graph break(s) and {c.recompiles} "
        "recompile(s).",
        bottleneck="framework_overhead",
        share=base,
        local_speedup=WHOLE_GRAPH_SPEEDUP,
        evidence={"graph_breaks": c.graph_breaks, "recompiles": c.recompiles},
        prescription=Prescription(knobs=knobs, code_change="; ".join(words)),
        confidence=0.7,
    )
