"""channels_last is refused for the convolutions oneDNN's NHWC backward mishandles."""

from __future__ import annotations

import pytest
from torch import nn

from torchdoctor.knobs import channels_last_hazard
from torchdoctor.knobs.memory_format import MIN_STRIDED_1X1_IN_CHANNELS
from torchdoctor.workloads import get_workload

NARROW = MIN_STRIDED_1X1_IN_CHANNELS - 1


@pytest.mark.parametrize("in_channels", [1, 4, 8, NARROW])
def test_a_narrow_strided_1x1_convolution_is_a_hazard(in_channels: int) -> None:
    model = nn.Sequential(nn.Conv2d(3, in_channels, 3), nn.Conv2d(in_channels, 32, 1, stride=2))
    reason = channels_last_hazard(model, "cpu")
    assert reason is not None
    assert f"stride-2 1x1 convolution '1' has {in_channels} input channels" in reason
    assert "oneDNN issue #6035" in reason
    assert channels_last_hazard(model, "cuda") is None  # cuDNN's kernels, not oneDNN's


@pytest.mark.parametrize(
    "conv",
    [
        nn.Conv2d(MIN_STRIDED_1X1_IN_CHANNELS, 32, 1, stride=2),  # a full channel block
        nn.Conv2d(4, 8, 1, stride=1),  # stride 1: no strided copy of the input
        nn.Conv2d(4, 8, 3, stride=2),  # not 1x1: another kernel
        nn.Conv2d(4, 8, 1, stride=2, groups=4),  # grouped: another kernel
    ],
    ids=["full_block", "stride_1", "kernel_3", "grouped"],
)
def test_other_convolutions_are_not(conv: nn.Conv2d) -> None:
    assert channels_last_hazard(nn.Sequential(conv), "cpu") is None


def test_the_builtin_cnn_trains_in_channels_last() -> None:
    # Its shortcuts take 16 and 32 channels at the default width.
    assert channels_last_hazard(get_workload("cnn").build_model(), "cpu") is None
    narrow = get_workload("cnn", width=4).build_model()
    assert channels_last_hazard(narrow, "cpu") is not None
