"""The name torchdoctor gives its own device syncs in a trace, so they are told from the job's.

The engine waits for the device to read its host clocks, and the script collector waits for
a CUDA event to read a step's time. Those waits land in the profiled trace beside the job's
own; each runs inside a `record_function` range of this name, and the analyzer
(analyze.syncs) lists the syncs beneath it apart from the job's instead of counting them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

#: The `record_function` name around a sync torchdoctor itself makes.
TOOL_SYNC_RANGE: Final = "torchdoctor::own_sync"


@contextlib.contextmanager
def tool_sync_range() -> Iterator[None]:
    """Mark the sync inside as torchdoctor's own (a no-op cost when no profiler records)."""
    from torch.autograd.profiler import record_function

    with record_function(TOOL_SYNC_RANGE):
        yield
