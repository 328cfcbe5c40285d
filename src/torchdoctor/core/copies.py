"""Host-to-device copy counts: one record, filled by the collector and read by the diagnosis."""

from __future__ import annotations

from pydantic import Field

from torchdoctor.core.records import SubRecord


class CopyCounts(SubRecord):
    """Host-to-device copies seen through Tensor.to / Tensor.cuda: how many came from pinned
    memory, how many were asynchronous, their bytes and the host seconds spent in them."""

    calls: int = 0
    non_blocking_calls: int = 0
    pinned_calls: int = 0
    bytes: int = 0
    seconds: float = 0.0
    #: Host tensors copied unchanged in several steps (collect/probes/constants.py): how many,
    #: their copies and bytes over the run, and copies by the script's `file:line`.
    constant_sources: int = 0
    constant_copies: int = 0
    constant_bytes: int = 0
    constant_sites: dict[str, int] = Field(default_factory=dict)

    @property
    def pageable_calls(self) -> int:
        return max(0, self.calls - self.pinned_calls)
