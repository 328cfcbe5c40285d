"""The distributed rules on constructed evidence: each fires on a torchrun rank's settings just
past its condition and not below it; and a rank's profile carries what they read."""

from __future__ import annotations

from diagnose_builders import evidence, phases

from torchdoctor.collect.script_profile import DistributedInfo, ScriptProfile
from torchdoctor.diagnose.evidence import (
    DataLoaderEvidence,
    DistributedEvidence,
    ThreadEvidence,
    TraceEvidence,
)
from torchdoctor.diagnose.from_profile import evidence_from_profile
from torchdoctor.diagnose.rules import (
    RULES,
    ddp_unused_parameter_search,
    distributed_debug_detail,
    ranks_oversubscribed,
    world_size_changed,
)

STEPS = phases(forward=0.3, backward=0.5)


def test_the_unused_parameter_search_left_on_is_found() -> None:
    off = DistributedEvidence(find_unused_parameters=False)
    assert ddp_unused_parameter_search.check(evidence(steps=STEPS, distributed=off)) is None
    assert ddp_unused_parameter_search.check(evidence(steps=STEPS)) is None  # not a rank
    on = DistributedEvidence(find_unused_parameters=True)
    f = ddp_unused_parameter_search.check(evidence(steps=STEPS, distributed=on, world_size=2))
    assert f is not None and f.prescription.knobs == {"find_unused_parameters": False}
    assert f.share == 0.5
    assert f.amdahl_bound == 1 / (
        1 - 0.5 * (1 - 1 / ddp_unused_parameter_search.SEARCH_OFF_SPEEDUP)
    )


def test_distributed_debug_detail_fires_on_detail_only() -> None:
    for level in (None, "OFF", "INFO"):
        ev = evidence(steps=STEPS, distributed=DistributedEvidence(debug=level))
        assert distributed_debug_detail.check(ev) is None, level
    ev = evidence(steps=STEPS, distributed=DistributedEvidence(debug="DETAIL"))
    f = distributed_debug_detail.check(ev)
    assert (
        f is not None and f.share == 0.5 and "TORCH_DISTRIBUTED_DEBUG" in f.prescription.code_change
    )
    # a profiled window's communication share is the share the checks cost, when known
    trace = TraceEvidence(has_device=False, comm_share=0.2)
    f = distributed_debug_detail.check(
        evidence(steps=STEPS, trace=trace, distributed=DistributedEvidence(debug="detail"))
    )
    assert f is not None and f.share == 0.2


def _ranks(ranks: int, workers: int, cores: int) -> object:
    return ranks_oversubscribed.check(
        evidence(
            steps=STEPS,
            world_size=ranks,
            distributed=DistributedEvidence(local_world_size=ranks),
            threads=ThreadEvidence(torch_threads=1, usable_cores=cores),
            dataloader=DataLoaderEvidence(uses_dataloader=True, num_workers=workers),
        )
    )


def test_ranks_and_their_workers_over_the_cores_are_found() -> None:
    assert _ranks(2, 1, 4) is None  # 2 x (1 + 1) = 4 processes on 4 cores
    f = _ranks(2, 2, 4)  # 6 processes on 4 cores
    assert f is not None and f.prescription.knobs == {"num_workers": 1}
    assert f.evidence["dataloader_workers_per_rank"] == 2
    f = _ranks(4, 0, 2)  # more ranks than cores
    assert f is not None and not f.prescription.knobs
    assert "--nproc_per_node 2" in f.prescription.code_change
    assert _ranks(1, 8, 2) is None  # one process: cpu_threads' and dataloader_wait's case


def test_every_distributed_rule_is_registered() -> None:
    for module in (
        ddp_unused_parameter_search,
        distributed_debug_detail,
        ranks_oversubscribed,
        world_size_changed,
    ):
        assert RULES[module.RULE_ID] is module.check


def test_a_ranks_profile_carries_what_the_rules_read() -> None:
    profile = ScriptProfile(
        argv=["train.py"],
        rank=0,
        world_size=2,
        distributed=DistributedInfo(
            debug="DETAIL", local_world_size=2, find_unused_parameters=[False, True]
        ),
    )
    ev = evidence_from_profile(profile)
    assert ev.distributed == DistributedEvidence(
        debug="DETAIL", local_world_size=2, find_unused_parameters=True
    )
    assert evidence_from_profile(ScriptProfile(argv=["train.py"])).distributed is None
