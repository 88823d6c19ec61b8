"""Frames of several portraits on a plain backdrop, for the small-face tests."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

# Six portraits in a 1080p frame, 260 px squares: the astronaut's face about 50 px
# wide, Grace Hopper's about 90.
SMALL_AT_1080P = [(150, 150), (800, 120), (1450, 200), (300, 650), (950, 700), (1550, 620)]


def portrait_frame(
    faces: Sequence[np.ndarray], size: tuple[int, int], at: Sequence[tuple[int, int]], side: int
) -> np.ndarray:
    """A (height, width) = ``size`` grey frame with ``faces`` taken in turn, each shrunk to
    a ``side`` px square with its top-left corner at each (x, y) of ``at``."""
    frame = np.full((*size, 3), 150, np.uint8)
    for i, (x, y) in enumerate(at):
        face = faces[i % len(faces)]
        frame[y : y + side, x : x + side] = cv2.resize(
            face, (side, side), interpolation=cv2.INTER_AREA
        )
    return frame


def portraits_found(
    boxes: Sequence[tuple[float, float, float, float]], at: Sequence[tuple[int, int]], side: int
) -> set[int]:
    """The portraits (their index in ``at``) whose square holds a box's centre."""
    return {
        i
        for i, (x, y) in enumerate(at)
        for x0, y0, x1, y1 in boxes
        if x < (x0 + x1) / 2 < x + side and y < (y0 + y1) / 2 < y + side
    }
