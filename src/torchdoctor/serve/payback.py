"""After how many requests a variant's setup (compilation, export, quantization) pays for
itself: setup_s / (eager latency - variant latency), with an interval.

The latencies are two samples of per-request times; each median comes with its interval
(`measure.summarize`, a bootstrap of the median), and the break-even's interval takes the
saving's extremes from those: the smallest saving (eager's low end minus the variant's high
end) gives the most requests, the largest saving the fewest. Where the smallest saving is not
positive the upper end is unbounded (None), and where the median saving is not positive the
variant never pays (requests None): a record holds no infinity, JSON having none.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field

from torchdoctor.core.errors import MeasureError
from torchdoctor.core.records import Record
from torchdoctor.measure import summarize


class BreakEven(Record):
    """Requests after which `setup_s` is paid back by the per-request saving.

    `requests`: the point estimate (None: the variant is not faster at the median, so it
    never pays); `requests_low`, `requests_high`: its interval at `confidence` (high None: the
    saving's interval reaches zero, so no finite bound; low None too: no saving at all is in
    the interval).
    """

    schema_name: ClassVar[str] = "serve_break_even"
    schema_version: ClassVar[int] = 1

    setup_s: float = Field(ge=0)
    saving_s: float
    saving_low_s: float
    saving_high_s: float
    requests: float | None
    requests_low: float | None
    requests_high: float | None
    confidence: float = Field(gt=0, lt=1)

    @property
    def pays_off(self) -> bool:
        return self.requests is not None


def _requests(setup_s: float, saving_s: float) -> float | None:
    if saving_s <= 0:
        return None
    return setup_s / saving_s


def break_even_requests(
    setup_s: float,
    eager_latencies_s: Sequence[float],
    variant_latencies_s: Sequence[float],
    *,
    confidence: float = 0.95,
) -> BreakEven:
    """The requests after which a variant's `setup_s` is repaid, from two latency samples.

    `setup_s` is the variant's own setup beyond eager's (what `PreparedVariant.setup_s`
    measures less eager's); the samples are per-request latencies in seconds.
    """
    if not math.isfinite(setup_s) or setup_s < 0:
        raise MeasureError(f"setup time {setup_s!r} s must be a finite non-negative number")
    eager = summarize(eager_latencies_s, label="eager", confidence=confidence)
    variant = summarize(variant_latencies_s, label="variant", confidence=confidence)
    saving = eager.median - variant.median
    saving_low = eager.ci_low - variant.ci_high
    saving_high = eager.ci_high - variant.ci_low
    point = _requests(setup_s, saving)
    return BreakEven(
        setup_s=setup_s,
        saving_s=saving,
        saving_low_s=saving_low,
        saving_high_s=saving_high,
        requests=point,
        requests_low=_requests(setup_s, saving_high),
        requests_high=_requests(setup_s, saving_low),
        confidence=confidence,
    )
