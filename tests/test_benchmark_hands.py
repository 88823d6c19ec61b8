"""The hands benchmark's counts: hands over the face, flicker gaps, repainted pixels."""

from __future__ import annotations

import numpy as np
from benchmark_scripts import benchmark_module  # tests/benchmark_scripts.py: tests/ is on sys.path


def test_runs_count_frames_with_a_hand_and_short_gaps() -> None:
    hand_runs = benchmark_module("hands").hand_runs
    # Over the face in 5 frames, elsewhere in 1; the gaps of 1 and 3 frames between finds
    # count, one of 4 frames does not, nor do frames with no face or the clip's ends.
    assert hand_runs("..11.1o...1....1--.") == {
        "hand over the face": 5,
        "a hand anywhere": 6,
        "gaps of 1-3 frames": 2,
    }


def test_repainted_is_the_share_of_pixels_changed_beyond_the_threshold() -> None:
    hands = benchmark_module("hands")
    frame = np.zeros((4, 4, 3), np.uint8)
    out = frame.copy()
    out[0, :2] = hands.REPAINTED + 1  # two pixels repainted
    out[1, :2] = hands.REPAINTED  # two changed by no more than the threshold
    where = np.zeros((4, 4), bool)
    where[:2] = True
    assert hands.repainted(out, frame, where) == 0.25
    assert np.isnan(hands.repainted(out, frame, np.zeros((4, 4), bool)))
