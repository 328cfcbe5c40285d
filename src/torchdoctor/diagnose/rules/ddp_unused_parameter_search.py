"""ddp_unused_parameter_search: DistributedDataParallel left searching for unused parameters."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding
from torchdoctor.knobs import FIND_UNUSED_PARAMETERS

RULE_ID: Final = "ddp_unused_parameter_search"
TITLE: Final = "DDP searches for unused parameters every step"

#: Assumed speedup of backward once the search is off. The DDP docs say only that the flag
#: "results in an extra traversal of the autograd graph every iteration, which can slow down
#: training"; the traversal walks the graph's nodes, not their arithmetic, so a modest 1.1x
#: keeps the bound conservative (the tuner's find_unused_parameters trial measures it).
SEARCH_OFF_SPEEDUP: Final = 1.1


def check(ev: Evidence) -> Finding | None:
    d = ev.distributed
    if d is None or not d.find_unused_parameters:
        return None
    backward = ev.phase("backward")
    if backward is None or backward <= 0:
        return None
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary="DistributedDataParallel runs with find_unused_parameters=True: every step it "
        f"walks the autograd graph for parameters the forward did not use, inside backward "
        f"({backward:.0%} of the step).",
        bottleneck="communication",
        share=backward,
        local_speedup=SEARCH_OFF_SPEEDUP,
        evidence={"backward_share": round(backward, 4), "world_size": ev.world_size},
        prescription=Prescription(
            knobs={FIND_UNUSED_PARAMETERS.name: False},
            code_change="DistributedDataParallel(model, find_unused_parameters=False) when the "
            "forward uses every parameter (DDP raises at the next step if it does not)",
        ),
        confidence=0.6,
    )
