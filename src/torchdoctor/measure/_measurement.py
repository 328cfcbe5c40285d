"""`Measurement`: per-call times and their robust summary, and `summarize` to build one.

Timings are skewed and heavy-tailed (a stray interrupt, a page fault, another process on the
core), so the centre is the median, the spread is the IQR, and the uncertainty is a bootstrap
confidence interval of the median. Mean and standard deviation are kept for reference only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Final

import numpy as np
from pydantic import Field

from torchdoctor.core.errors import MeasureError
from torchdoctor.core.load import MachineLoad
from torchdoctor.core.records import Record
from torchdoctor.measure._resample import median_ci

#: IQR / median above which the spread is called high. Same value torch.utils.benchmark uses
#: (`_IQR_WARN_THRESHOLD` in torch/utils/benchmark/utils/common.py).
IQR_WARN_FRACTION: Final = 0.10
#: IQR / median above which the spread is called gross (torch's `_IQR_GROSS_WARN_THRESHOLD`).
IQR_GROSS_WARN_FRACTION: Final = 0.25
#: p99 / median above which a heavy tail is reported: one call in a hundred taking 1.5x the
#: typical time means something intermittent (GC, allocator, another tenant) is interfering.
TAIL_WARN_RATIO: Final = 1.5
#: Fewer samples than this give percentiles and intervals that are little more than the
#: extreme values; a percentile bootstrap of the median needs roughly ten or more points.
MIN_SAMPLES_FOR_STATS: Final = 10


class Measurement(Record):
    """Timings of one statement: per-call seconds, their percentiles and the median's CI.

    `times` holds one entry per sample: a block of `number_per_block` calls, divided by
    `number_per_block`. All statistics are in seconds per call. `machine_load` is the other
    work on the machine meanwhile (version 2); when it disturbed the measurement, its warning
    is also in `warnings`.
    """

    schema_name: ClassVar[str] = "measurement"
    schema_version: ClassVar[int] = 2

    label: str = ""
    times: list[float] = Field(min_length=1)
    number_per_block: int = Field(ge=1)
    median: float
    mean: float
    stdev: float
    iqr: float
    min: float
    max: float
    p5: float
    p25: float
    p50: float
    p75: float
    p95: float
    p99: float
    ci_low: float
    ci_high: float
    confidence: float = Field(gt=0, lt=1)
    warnings: list[str] = Field(default_factory=list)
    machine_load: MachineLoad | None = None

    @property
    def n(self) -> int:
        """Number of samples (blocks)."""
        return len(self.times)

    @property
    def total_calls(self) -> int:
        return len(self.times) * self.number_per_block

    @property
    def rel_ci_halfwidth(self) -> float:
        """Half the width of the median's interval, as a fraction of the median."""
        if self.median <= 0:
            return 0.0 if self.ci_high == self.ci_low else float("inf")
        return (self.ci_high - self.ci_low) / (2.0 * self.median)

    @property
    def has_warnings(self) -> bool:
        return bool(self.warnings)

    def with_warnings(self, *extra: str) -> Measurement:
        """A copy with `extra` warnings appended (records are frozen)."""
        return self.model_copy(update={"warnings": [*self.warnings, *extra]})

    def with_load(self, load: MachineLoad | None) -> Measurement:
        """A copy carrying `load`, and its warning when the machine was disturbed."""
        return self.model_copy(
            update={"machine_load": load, "warnings": [*self.warnings, *load_warnings(load)]}
        )


def load_warnings(load: MachineLoad | None) -> list[str]:
    return [load.warning] if load is not None and load.warning else []


def noise_warnings(times: np.ndarray, median: float, iqr: float, p99: float) -> list[str]:
    """Human-readable warnings about the spread of `times` (thresholds above)."""
    warnings: list[str] = []
    n = int(times.size)
    if n < MIN_SAMPLES_FOR_STATS:
        warnings.append(
            f"only {n} sample(s): percentiles and the confidence interval are unreliable; "
            "give the measurement more time"
        )
    if median > 0:
        spread = iqr / median
        if spread > IQR_GROSS_WARN_FRACTION:
            warnings.append(
                f"IQR is {spread:.0%} of the median (gross noise, over "
                f"{IQR_GROSS_WARN_FRACTION:.0%}): the machine is busy or the statement varies"
            )
        elif spread > IQR_WARN_FRACTION:
            warnings.append(
                f"IQR is {spread:.0%} of the median (noisy, over {IQR_WARN_FRACTION:.0%})"
            )
        if n >= MIN_SAMPLES_FOR_STATS and p99 / median > TAIL_WARN_RATIO:
            warnings.append(
                f"heavy tail: p99 is {p99 / median:.2f}x the median "
                f"(over {TAIL_WARN_RATIO}x); something intermittent interferes"
            )
    return warnings


def summarize(
    samples_s: Sequence[float],
    *,
    label: str = "",
    number_per_sample: int = 1,
    confidence: float = 0.95,
) -> Measurement:
    """Summarize per-call times in seconds (one per sample) into a `Measurement`.

    `number_per_sample` says how many calls each sample averaged over (1 for per-step times).
    """
    if not 0.0 < confidence < 1.0:
        raise MeasureError(
            f"confidence {confidence!r} is not between 0 and 1", hint="use e.g. 0.95"
        )
    if number_per_sample < 1:
        raise MeasureError(f"number_per_sample {number_per_sample!r} must be at least 1")
    times = np.asarray(list(samples_s), dtype=np.float64)
    if times.size == 0:
        raise MeasureError(f"no samples to summarize for {label or 'measurement'!r}")
    if not np.all(np.isfinite(times)) or np.any(times < 0):
        raise MeasureError(
            f"samples for {label or 'measurement'!r} contain negative or non-finite times",
            hint="pass elapsed seconds per call",
        )
    p5, p25, p50, p75, p95, p99 = (float(v) for v in np.percentile(times, [5, 25, 50, 75, 95, 99]))
    median = float(np.median(times))
    ci_low, ci_high = median_ci(times, confidence=confidence)
    iqr = p75 - p25
    return Measurement(
        label=label,
        times=[float(t) for t in times],
        number_per_block=number_per_sample,
        median=median,
        mean=float(times.mean()),
        stdev=float(times.std(ddof=1)) if times.size > 1 else 0.0,
        iqr=iqr,
        min=float(times.min()),
        max=float(times.max()),
        p5=p5,
        p25=p25,
        p50=p50,
        p75=p75,
        p95=p95,
        p99=p99,
        ci_low=ci_low,
        ci_high=ci_high,
        confidence=confidence,
        warnings=noise_warnings(times, median, iqr, p99),
    )
