"""Host operator overhead: the share of operator time spent in calls too short to pay off.

A CPU-only trace has no kernels to measure launch overhead by; its host equivalent is the
time in tiny operator calls, those under TINY_OP_US, where eager dispatch (argument parsing,
dispatcher, allocation) rather than math is most of the call. Time is self time (a call's
duration minus its direct children's), so nested ops count once and the shares of all calls
add up to the total operator time. Computed on GPU traces too, for the host side.
"""

from __future__ import annotations

import numpy as np

from torchdoctor.analyze.ops import OVERHEAD_CALL_US
from torchdoctor.analyze.records import HostOpStats

# The same bar as the op table's "overhead" class: ~10 us is the per-op cost of eager
# dispatch plus a launch (PyTorch performance tuning guide), so a call shorter than that is
# mostly overhead.
TINY_OP_US = OVERHEAD_CALL_US


def host_op_stats(durations: np.ndarray, self_t: np.ndarray) -> HostOpStats | None:
    """Tiny-call shares from the cpu_op calls' durations and self times; None without ops."""
    if durations.size == 0:
        return None
    tiny = durations < TINY_OP_US
    total = float(self_t.sum())
    return HostOpStats(
        calls=int(durations.size),
        op_time_us=total,
        tiny_op_us=TINY_OP_US,
        tiny_calls_pct=100.0 * float(tiny.mean()),
        tiny_op_time_pct=100.0 * float(self_t[tiny].sum()) / total if total > 0 else 0.0,
    )
