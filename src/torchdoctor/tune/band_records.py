"""The quality band a candidate's late loss was held to, per safety class (tune.parity).

The band is the wider of two: the prediction interval of the baseline's own spread (the
statistic), and the class's numerical floor (a share of the reference mean). Which one set
it matters to the reader: on a GPU whose reference runs agree to four digits the statistic
shrinks to nothing and the floor decides, which the yardstick's interval alone never says.
"""

from __future__ import annotations

from typing import Literal

from torchdoctor.core.records import SubRecord
from torchdoctor.core.vocabulary import Safety

BandBound = Literal["statistic", "floor"]


class QualityBand(SubRecord):
    """Where a candidate of one safety class must land: `low`..`high` (`low` is None for a
    one-sided class, which only must not rise above `high`)."""

    safety: Safety
    low: float | None
    high: float
    #: which half-width was wider and so applied
    set_by: BandBound
    #: half-width of the prediction interval (absolute loss units)
    statistic_half: float
    #: the class's floor (absolute loss units) and as a share of the reference mean
    floor_half: float
    floor_share: float
    confidence: float
