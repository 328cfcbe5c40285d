"""Host-to-device copy counts: one record, filled by the collector and read by the diagnosis."""

from __future__ import annotations

from torchdoctor.core.records import SubRecord


class CopyCounts(SubRecord):
    """Host-to-device copies seen through Tensor.to / Tensor.cuda: how many came from pinned
    memory, how many were asynchronous, their bytes and the host seconds spent in them."""

    calls: int = 0
    non_blocking_calls: int = 0
    pinned_calls: int = 0
    bytes: int = 0
    seconds: float = 0.0

    @property
    def pageable_calls(self) -> int:
        return max(0, self.calls - self.pinned_calls)
