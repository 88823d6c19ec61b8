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


# A source photo whose one face is small in a large frame: the astronaut's portrait in
# a SMALL_SOURCE_SIDE px square at SMALL_SOURCE_AT of a 1080p frame, her face about 55
# px wide (BlazeFace shown the frame whole finds none; its tiles find it).
SMALL_SOURCE_AT = (800, 400)
SMALL_SOURCE_SIDE = 280


def small_source_photo(portrait: np.ndarray) -> np.ndarray:
    """``portrait`` (a face photo) shrunk into one SMALL_SOURCE_SIDE px square of a
    grey 1080p frame, at SMALL_SOURCE_AT."""
    return portrait_frame([portrait], (1080, 1920), [SMALL_SOURCE_AT], SMALL_SOURCE_SIDE)


def in_small_source(box: tuple[float, float, float, float]) -> bool:
    """Whether ``box`` (x0, y0, x1, y1) lies inside small_source_photo's portrait."""
    (x, y), side = SMALL_SOURCE_AT, SMALL_SOURCE_SIDE
    x0, y0, x1, y1 = box
    return x < x0 < x1 < x + side and y < y0 < y1 < y + side
