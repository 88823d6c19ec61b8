"""A hand's silhouette from its 21 landmarks.

A hand held to the face (a chin on a fist, fingers at the cheek, a hand round a
microphone at the mouth) lies in front of the face the mesh fits through it: a
swap paints the source's skin over its fingers, smearing their knuckles and
creases into the cheek. A hand landmarker (MediaPipe's, 21 points: the wrist, then
four joints up each finger from the thumb to the little finger) gives its
skeleton; :func:`hand_silhouette` draws the hand's area round it, the palm as the
hull of the wrist and the fingers' roots, each finger as a thick stroke along its
bones, as wide as a share of the palm's length (HAND_FINGER_WIDTH). The strokes
end in round caps (OpenCV's thick lines), so a fingertip reaches half a finger's
width past its landmark, as a real one does.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.errors import InputError

__all__ = [
    "HAND_BONES",
    "HAND_EDGE_SIGMA",
    "HAND_FINGER_WIDTH",
    "HAND_POINTS",
    "hand_silhouette",
    "hands_area",
    "keep_hands",
]

HAND_POINTS = 21
# The fingers' chains of landmarks, thumb first, each from its root on the palm.
_FINGERS = ((1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11, 12), (13, 14, 15, 16), (17, 18, 19, 20))
HAND_BONES: tuple[tuple[int, int], ...] = tuple(
    (a, b) for chain in _FINGERS for a, b in zip(chain[:-1], chain[1:], strict=True)
)
# The palm: the hull of the wrist and each finger's root (the thumb's two lowest joints).
_PALM = (0, 1, 2, 5, 9, 13, 17)
# A finger's width as a share of the palm's length (the wrist to the middle finger's
# root): 0.45 covered the development photos' fists and fingers at the chin and on a
# microphone to their edges (0.35 left the knuckles' sides to the swap; a finger is
# about a third of the palm's length wide, and the landmarks lie on the joints'
# middles, not the bones' edges).
HAND_FINGER_WIDTH = 0.45
# The silhouette's edge is softened by a Gaussian of this sigma (pixels) where it is laid
# back over a swap: the landmarks place a finger's edge to a pixel or two, and a hard
# edge would show that error as a step.
HAND_EDGE_SIGMA = 1.0
# Hands whose palm is shorter than this many pixels are drawn as their palm's hull
# grown by that width alone (a stroke under 2 px is no finger).
_MIN_STROKE = 2


def _hand_points(landmarks: NDArray[np.floating]) -> NDArray[np.float64]:
    """A hand's (21, 2) points as float64; InputError for another shape or a NaN."""
    points = np.asarray(landmarks, np.float64)
    if points.ndim != 2 or points.shape[0] != HAND_POINTS or points.shape[1] < 2:
        raise InputError(f"a hand has {HAND_POINTS} (x, y) landmarks, got shape {points.shape}")
    if not np.all(np.isfinite(points[:, :2])):
        raise InputError("hand landmarks must be finite")
    return points[:, :2]


def hand_silhouette(
    landmarks: NDArray[np.floating],
    shape: tuple[int, int],
    *,
    offset: tuple[float, float] = (0.0, 0.0),
    scale: float = 1.0,
    finger_width: float = HAND_FINGER_WIDTH,
) -> NDArray[np.float32]:
    """The area a hand covers, drawn on an image of ``shape``.

    Args:
        landmarks: the hand's 21 points (x, y), in the frame's pixels (MediaPipe's
            order: the wrist, then each finger's four joints from the thumb).
        shape: (H, W) of the mask to draw.
        offset: the mask's top-left corner in the frame's pixels.
        scale: the mask's pixels per frame pixel (a crop drawn at another size).
        finger_width: a finger's width as a share of the palm's length.

    Returns:
        (H, W) float32, 1 on the hand (anti-aliased edges), 0 elsewhere.

    Raises:
        InputError: ``landmarks`` is not (21, 2) or more columns, or holds NaN (a
            ``ValueError`` too).

    Example:
        >>> mask = hand_silhouette(hand.landmarks, frame.shape[:2])  # doctest: +SKIP
    """
    points = _hand_points(landmarks)
    height, width = shape
    mask = np.zeros((height, width), np.uint8)
    # Drawn in 1/16 px (OpenCV's fixed-point shift) so that a small crop keeps its shape.
    shift = 4
    at = np.round((points[:, :2] - np.asarray(offset, np.float64)) * scale * (1 << shift)).astype(
        np.int64
    )
    # Far-off points (a hand at the other end of a large frame) stay in int32's range.
    at = np.clip(at, -(1 << 28), 1 << 28).astype(np.int32)
    palm = float(np.hypot(*(points[9, :2] - points[0, :2]))) * scale
    stroke = max(_MIN_STROKE, int(round(palm * finger_width)))
    hull = cv2.convexHull(at[list(_PALM)])
    cv2.fillConvexPoly(mask, hull, 255, cv2.LINE_AA, shift)
    for a, b in HAND_BONES:
        cv2.line(mask, tuple(at[a]), tuple(at[b]), 255, stroke, cv2.LINE_AA, shift)
    # The palm's hull meets the fingers' roots at their middles: its outline too is
    # a stroke, so the outer fingers' sides (the index's, the little finger's) and the
    # wrist's are as wide as a finger.
    cv2.polylines(mask, [hull], True, 255, stroke, cv2.LINE_AA, shift)
    return mask.astype(np.float32) * np.float32(1.0 / 255.0)


def hands_area(
    hands: Sequence[NDArray[np.floating]],
    shape: tuple[int, int],
    *,
    offset: tuple[float, float] = (0.0, 0.0),
    scale: float = 1.0,
    finger_width: float = HAND_FINGER_WIDTH,
) -> NDArray[np.float32]:
    """The area all of ``hands`` cover (each hand's landmarks, as for
    :func:`hand_silhouette`, which the other arguments are): their silhouettes' maximum,
    (H, W) float32, all 0 with no hand."""
    area = np.zeros(shape, np.float32)
    for landmarks in hands:
        silhouette = hand_silhouette(
            landmarks, shape, offset=offset, scale=scale, finger_width=finger_width
        )
        np.maximum(area, silhouette, out=area)
    return area


def keep_hands(
    out: NDArray[np.uint8],
    original: NDArray[np.uint8],
    hands: Sequence[NDArray[np.floating]],
    *,
    finger_width: float = HAND_FINGER_WIDTH,
    edge_sigma: float = HAND_EDGE_SIGMA,
) -> None:
    """Lay each hand of ``original`` back over ``out`` (in place): a swapped frame keeps
    the hands in front of its faces. Only each hand's box is touched.

    Args:
        out: (H, W, 3) uint8, the swapped frame, written in place.
        original: (H, W, 3) uint8, the frame before the swap.
        hands: each hand's (21, 2) landmarks in the frame's pixels.
        finger_width: see :func:`hand_silhouette`.
        edge_sigma: the silhouette's soft edge (see HAND_EDGE_SIGMA).

    Raises:
        InputError: ``out`` and ``original`` differ in shape, or a hand's landmarks
            are not (21, 2) finite points (a ``ValueError`` too).
    """
    if out.shape != original.shape:
        raise InputError(f"frames differ in shape: {out.shape} and {original.shape}")
    height, width = out.shape[:2]
    for landmarks in hands:
        points = _hand_points(landmarks)
        palm = float(np.hypot(*(points[9, :2] - points[0, :2])))
        margin = palm * finger_width + 3.0 * edge_sigma + 2.0
        x0 = int(max(0, np.floor(points[:, 0].min() - margin)))
        y0 = int(max(0, np.floor(points[:, 1].min() - margin)))
        x1 = int(min(width, np.ceil(points[:, 0].max() + margin)))
        y1 = int(min(height, np.ceil(points[:, 1].max() + margin)))
        if x1 <= x0 or y1 <= y0:
            continue
        mask = hand_silhouette(
            points, (y1 - y0, x1 - x0), offset=(x0, y0), finger_width=finger_width
        )
        if edge_sigma > 0:
            mask = cv2.GaussianBlur(mask, (0, 0), edge_sigma)
        out[y0:y1, x0:x1] = cv2.blendLinear(
            original[y0:y1, x0:x1], out[y0:y1, x0:x1], mask, 1.0 - mask
        )
