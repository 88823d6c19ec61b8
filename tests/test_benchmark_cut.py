"""The cut-faces benchmark's crops."""

from __future__ import annotations

import numpy as np
import pytest
from benchmark_scripts import benchmark_module  # tests/benchmark_scripts.py: tests/ is on sys.path


@pytest.mark.parametrize("side", ["left", "right", "top", "bottom"])
def test_the_share_of_the_box_lies_past_the_side(side: str) -> None:
    cut_frame = benchmark_module("cut").cut_frame
    frame = np.arange(200 * 300 * 3, dtype=np.uint32).reshape(200, 300, 3).astype(np.uint8)
    box = (100.0, 50.0, 200.0, 150.0)
    crop, (dx, dy) = cut_frame(frame, box, side, 0.3)
    h, w = crop.shape[:2]
    np.testing.assert_array_equal(crop, frame[dy : dy + h, dx : dx + w])
    x0, y0, x1, y1 = box[0] - dx, box[1] - dy, box[2] - dx, box[3] - dy
    out = {"left": -x0, "right": x1 - w, "top": -y0, "bottom": y1 - h}[side]
    assert out == pytest.approx(30.0)
    assert crop.flags["C_CONTIGUOUS"]
