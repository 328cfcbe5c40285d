"""The legacy weight-grad op takes its FLOPs from the backward op that encloses it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from trace_events import op_event, write_trace

from torchdoctor.analyze.loading import load_trace

F32 = "float"
X, GRAD, W = [2, 4, 9, 9], [2, 6, 9, 9], [6, 4, 3, 3]
#: One forward of this convolution: 2 * N * C_out * H_out * W_out * C_in * kh * kw.
FORWARD = 2 * 2 * 6 * 9 * 9 * 4 * 3 * 3


def _legacy_backward(ts: float, tid: int = 1) -> list[dict[str, object]]:
    """torch 1.8's split cuDNN backward: the backend op and its two children."""
    types = [F32, F32, F32, "GenericList"]
    return [
        op_event("aten::cudnn_convolution_backward", ts, 100, [X, GRAD, W, []], types, tid=tid),
        op_event(
            "aten::cudnn_convolution_backward_input", ts + 5, 40, [[], GRAD, W], ["", F32, F32],
            tid=tid,
        ),
        op_event(
            "aten::cudnn_convolution_backward_weight", ts + 50, 40, [[], GRAD, X],
            ["", F32, F32], tid=tid,
        ),
    ]  # fmt: skip


def _flops(path: Path, name: str) -> list[float]:
    tl = load_trace(path)
    return tl.flops[tl.name_mask(name.__eq__)].tolist()


def test_weight_grad_counts_one_forward_from_its_parent(tmp_path: Path) -> None:
    events = _legacy_backward(0.0) + _legacy_backward(1000.0, tid=2)
    path = write_trace(tmp_path / "t.json", events)
    assert _flops(path, "aten::cudnn_convolution_backward") == [2 * FORWARD] * 2
    assert _flops(path, "aten::cudnn_convolution_backward_input") == [FORWARD] * 2
    assert _flops(path, "aten::cudnn_convolution_backward_weight") == [FORWARD] * 2


def test_weight_grad_outside_a_legacy_backward_stays_unknown(tmp_path: Path) -> None:
    lone = _legacy_backward(0.0)[2]
    other_thread = [*_legacy_backward(500.0)[:1], {**lone, "tid": 9, "ts": 510.0}]
    path = write_trace(tmp_path / "t.json", [lone, *other_thread])
    assert np.isnan(_flops(path, "aten::cudnn_convolution_backward_weight")).all()
