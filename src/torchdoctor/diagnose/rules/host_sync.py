"""host_sync: the host waits for the device (or formats tensors) every step."""

from __future__ import annotations

from typing import Final

from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import Finding, Prescription, make_finding

RULE_ID: Final = "host_sync"
TITLE: Final = "Host synchronization points every step"

#: Sync points per step from which the rule fires: one `.item()` per step for logging is
#: normal practice (e.g. nanoGPT reads the loss every log interval, not every step), so
#: the rule asks for more than one per step on average.
MIN_SYNCS_PER_STEP: Final = 1.5
#: Minimum share of step time the syncs cost from which the rule fires: below 5% a fix is
#: worth under ~1.05x (the same floor as dataloader_wait's, from the TensorBoard profiler
#: plugin's "moderately input-bound" cut).
MIN_SHARE: Final = 0.05


#: The change handed back for a per-step `.item()`/print of the loss: accumulate on the device
#: and read once every `log_every` steps (one sync per interval instead of one per step).
ACCUMULATE_SNIPPET: Final = """\
loss_sum = torch.zeros((), device=loss.device)  # once, before the loop
...
loss_sum += loss.detach()  # every step: stays on the device, no sync
if step % log_every == 0:
    print(f"loss {(loss_sum / log_every).item():.4f}")  # one sync per interval
    loss_sum.zero_()
"""


def _syncs_per_step(ev: Evidence) -> float | None:
    if ev.syncs is not None:
        return ev.syncs.total_per_step
    if ev.trace is not None and ev.trace.sync_points_per_step is not None:
        return ev.trace.sync_points_per_step
    return None


def _share(ev: Evidence) -> tuple[float | None, str]:
    """The share of step time the syncs cost, and how it was obtained.

    On a GPU, what a sync costs is the device idle it leaves: the host waits for the launch
    queue to drain (work the device does anyway on a GPU-bound job), and after the sync the
    device idles until the host launches again. A trace measures that directly (analyze.syncs:
    per sync, the idle after it, at most the time blocked in it); it is used whenever there is
    one, for a script too. Without it, on CPU the time blocked inside the sync calls is the
    cost (converting or formatting the tensor), and on a GPU it is only an upper bound.
    Otherwise an upper bound: what a step holds outside its named phases (a script without
    timed syncs), or the device idle share (a trace analysed before sync costs were recorded).
    """
    tr = ev.trace
    if tr is not None and tr.has_device and tr.sync_cost_share is not None:
        return tr.sync_cost_share, "device_idle_after_syncs_share"
    if ev.syncs is not None and ev.syncs.time_share is not None:
        return ev.syncs.time_share, ("host_blocked_share" if ev.is_gpu else "sync_time_share")
    other = ev.phase("other")
    if other is not None:
        return other, "share_outside_phases"
    if tr is not None and tr.idle_pct is not None:
        return tr.idle_pct / 100.0, "device_idle_share"
    return None, ""


#: Confidence by how the share was obtained: measured cost (the device idle a trace shows
#: after each sync, or the time in sync calls on CPU), an upper bound from timed calls on a
#: GPU (includes queue draining), one from the phases, one from the device idle alone.
_CONFIDENCE: Final = {
    "device_idle_after_syncs_share": 0.8,
    "sync_time_share": 0.8,
    "host_blocked_share": 0.6,
    "share_outside_phases": 0.7,
    "device_idle_share": 0.4,
}


def check(ev: Evidence) -> Finding | None:
    per_step = _syncs_per_step(ev)
    share, basis = _share(ev)
    if per_step is None or share is None:
        return None
    if per_step < MIN_SYNCS_PER_STEP or share < MIN_SHARE:
        return None
    sites = ev.syncs.sites if ev.syncs else {}
    top = sorted(sites.items(), key=lambda kv: -kv[1])[:3]
    kinds = ev.syncs.per_step if ev.syncs else {}
    evidence: dict[str, float | int | str | bool | None] = {
        "syncs_per_step": round(per_step, 2),
        basis: round(share, 4),
        **{f"{k}_per_step": round(v, 2) for k, v in kinds.items() if v},
    }
    if top:
        evidence["top_sites"] = ", ".join(f"{s} ({n})" for s, n in top)
    if ev.trace is not None and ev.trace.sync_blocked_share is not None:
        evidence["host_blocked_share"] = round(ev.trace.sync_blocked_share, 4)
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=(
            f"{per_step:.1f} host sync points per step (.item(), .cpu(), printing tensors); "
            f"{share:.0%} of the step is spent "
            + (
                "inside them."
                if basis == "sync_time_share"
                else "as device idle after them."
                if basis == "device_idle_after_syncs_share"
                else "around them."
            )
        ),
        bottleneck="host_sync",
        share=share,
        evidence=evidence,
        prescription=Prescription(
            code_change=(
                "accumulate metrics on the device and read them every N steps; remove "
                "per-step print(tensor)/.item()/.cpu(); on CUDA find the rest with "
                "torch.cuda.set_sync_debug_mode('warn')"
            ),
            site=top[0][0] if top else None,
            snippet=ACCUMULATE_SNIPPET,
        ),
        # Phases without any sync timing at all (a workload run) say less: 0.4 as the idle.
        confidence=_CONFIDENCE[basis]
        if basis != "share_outside_phases" or ev.syncs is not None
        else _CONFIDENCE["device_idle_share"],
    )
