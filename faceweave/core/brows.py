"""Brows where the photo shows them.

MediaPipe's mesh follows a brow raise only part of the way: on a talking woman
raising hers (vid_p04) its brow contours lay about 0.07 inter-ocular distances
below the dark band of her brows. A swap then warped the target as if its brows
were lower than they are, and wherever the target's own forehead shows (above a
source whose fringe hides its forehead) her real brows came through above the
swapped ones: two pairs of brows.

:func:`brow_lifts` looks for each brow's dark band above the mesh's one: the
brow's band (between its upper and lower contour) is moved up the face in small
steps, and at each the band is compared with the same band one brow-height above
it and one below. A brow is a dark ridge, darker than the skin on both sides; the
lift is where that ridge is strongest, taken only when it lies clearly above the
mesh's brow and is clearly stronger there (a fringe above the brows is dark on
the upper side and fails the test). :class:`BrowLift` moves the mesh's brows by
those lifts in pose space, the forehead and the lids' upper skin filled smoothly
(eyes, nose, lips and the face's outline stay).
"""

from __future__ import annotations

import functools

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.core.facemodel import FaceModel
from faceweave.core.geometry import from_pose_space, to_pose_space
from faceweave.core.shape import HarmonicFill
from faceweave.types import Pose

# Lifts tried, in inter-ocular distances up the face (negative: down).
LIFT_STEPS = np.round(np.arange(-0.06, 0.2001, 0.01), 3)
# A lift is taken from LIFT_MIN up, where the ridge (the lighter of the bands above
# and below, minus the brow's band, grey levels) is at least RIDGE_MIN and exceeds
# the ridge at the mesh's own brow by RIDGE_GAIN. On the 32 development photos no
# brow passes (the strongest upward candidates, into a fringe or a turned face's
# shadow, reach a ridge of 9); on a still of vid_p04's raised brows both do (steps
# 0.08 and 0.06, ridges 37 and 53 against -33 and -60 at the mesh's brows). A man's
# thick brow the tracked mesh sits on (vid_p05) read 0.03-0.05 up: hence 0.06.
LIFT_MIN = 0.06
RIDGE_MIN = 15.0
RIDGE_GAIN = 15.0
# The mesh's brow band lies a little above the brows' darkest band where it fits them
# (its best step on the development photos' frontal faces: a median of -0.03): a lift
# puts it that far above the band it found (without it a raised brow's upper edge
# still showed as a dark line above the swapped one).
LIFT_BIAS = 0.03
# Faces whose eyes lie closer than this (pixels) or are turned further (degrees of
# yaw) are left as the mesh has them: too few pixels, or a foreshortened far brow.
LIFT_MIN_IOD = 40.0
LIFT_MAX_YAW = 25.0
# Points sampled along a brow (between its contour columns) and across it.
_ALONG = 9
_ACROSS = (0.2, 0.4, 0.6, 0.8)
# Where the samples along lie between the five contour columns, and across.
_ALONG_AT = np.linspace(0.0, 4.0, _ALONG)
_ALONG_INDEX = np.minimum(_ALONG_AT.astype(int), 3)
_ALONG_FRAC = (_ALONG_AT - _ALONG_INDEX)[:, None]
_ACROSS_SHARE = np.asarray(_ACROSS)[:, None, None]


@functools.lru_cache(maxsize=4)
def brow_columns(model: FaceModel) -> tuple[tuple[NDArray[np.intp], NDArray[np.intp]], ...]:
    """Each brow's (upper, lower) contour vertices, paired column by column across the
    face (the mesh's brows are five such columns), for the model's left and right
    eyebrow in that order."""
    out = []
    for name in ("left_eyebrow", "right_eyebrow"):
        ids = np.asarray(model.regions[name], np.intp)
        ids = ids[np.argsort(model.canonical[ids, 0], kind="stable")]
        pairs = ids.reshape(-1, 2)
        upper_first = model.canonical[pairs[:, 0], 1] < model.canonical[pairs[:, 1], 1]
        upper = np.where(upper_first, pairs[:, 0], pairs[:, 1])
        lower = np.where(upper_first, pairs[:, 1], pairs[:, 0])
        out.append((upper, lower))
    return tuple(out)


def _band_samples(upper: NDArray[np.float64], lower: NDArray[np.float64]) -> NDArray[np.float64]:
    """(P, 2) points inside a brow's band, from its (C, 2) upper and lower contours."""
    index, frac = _ALONG_INDEX, _ALONG_FRAC
    top = upper[index] * (1.0 - frac) + upper[index + 1] * frac
    bottom = lower[index] * (1.0 - frac) + lower[index + 1] * frac
    return np.asarray((bottom + (top - bottom) * _ACROSS_SHARE).reshape(-1, 2))


def brow_lifts(
    image: NDArray[np.uint8],
    landmarks: NDArray[np.floating],
    model: FaceModel,
    yaw: float = 0.0,
) -> tuple[float, float]:
    """How far to lift each brow of the mesh (the model's left, then right), in
    inter-ocular distances: the step up the face at which its dark band was found,
    plus LIFT_BIAS; 0 where the band is not clearly above the mesh's brow (see
    LIFT_MIN, RIDGE_MIN, RIDGE_GAIN) or the face is too small or turned to tell.

    Shape:
        - image: (H, W, 3) BGR or (H, W) grey, uint8.
        - landmarks: (478, 2+) mesh in image pixels.
    """
    points = np.asarray(landmarks, np.float64)[:, :2]
    left, right = points[33], points[263]
    iod = float(np.linalg.norm(right - left))
    if iod < LIFT_MIN_IOD or abs(yaw) > LIFT_MAX_YAW:
        return 0.0, 0.0
    along = (right - left) / iod
    up = np.array([along[1], -along[0]])
    if up[1] > 0:  # towards the top of the face (image y grows downwards)
        up = -up
    # Every brow's band at every step, and one brow-height above and below it.
    offsets = LIFT_STEPS * iod
    where, low, high = [], [], []
    for upper, lower in brow_columns(model):
        band = _band_samples(points[upper], points[lower])
        height = float(np.mean(np.linalg.norm(points[upper] - points[lower], axis=1)))
        shifts = np.concatenate([offsets, offsets + height, offsets - height])
        where.append(band[None, :, :] + shifts[:, None, None] * up[None, None, :])
        # The box of it: the band's, moved to both ends of the shifts.
        ends = np.array([shifts.min(), shifts.max()])[:, None] * up[None, :]
        low.append(band.min(0) + ends.min(0))
        high.append(band.max(0) + ends.max(0))
    samples = np.stack(where)  # (brows, 3 * steps, points, 2)
    x0, y0 = np.floor(np.minimum(*low)).astype(int) - 1
    x1, y1 = np.ceil(np.maximum(*high)).astype(int) + 2
    h, w = image.shape[:2]
    if x0 < 0 or y0 < 0 or x1 > w or y1 > h:
        return 0.0, 0.0
    crop = image[y0:y1, x0:x1]
    grey = (crop if crop.ndim == 2 else cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY)).astype(np.float32)
    local = (
        (samples - np.array([x0, y0], np.float64))
        .astype(np.float32)
        .reshape(-1, samples.shape[2], 2)
    )
    values = cv2.remap(
        grey, local[..., 0], local[..., 1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )
    means = values.mean(1).reshape(len(where), 3, len(LIFT_STEPS))
    at_mesh = int(np.flatnonzero(LIFT_STEPS == 0.0)[0])
    lifts = []
    for band_means in means:
        ridge = np.minimum(band_means[1], band_means[2]) - band_means[0]
        best = int(np.argmax(ridge))
        taken = (
            LIFT_STEPS[best] >= LIFT_MIN
            and ridge[best] >= RIDGE_MIN
            and ridge[best] - ridge[at_mesh] >= RIDGE_GAIN
        )
        lifts.append(float(LIFT_STEPS[best]) + LIFT_BIAS if taken else 0.0)
    return lifts[0], lifts[1]


class BrowLift:
    """Moves a mesh's brows up the face by given lifts (see :func:`brow_lifts`), in
    pose space: each brow's vertices by its lift, the forehead and the skin between
    brows and eyes filled harmonically; the eyes (lids and irises), nose, lips, the
    face's outline and all below the eyes stay."""

    def __init__(self, model: FaceModel) -> None:
        self.model = model
        self.brows = [
            np.asarray(model.regions[n], np.intp) for n in ("left_eyebrow", "right_eyebrow")
        ]
        anchors = set(self.brows[0].tolist()) | set(self.brows[1].tolist())
        fixed = set(model.regions["nose"].tolist()) | set(model.regions["lips"].tolist())
        fixed |= set(model.regions["face_oval"].tolist())
        for name in ("left_eye", "right_eye"):
            fixed |= set(model.regions[name].tolist())
        fixed |= set(range(468, 478))
        # And everything lower down the face than the eyes' middle: the lift spreads
        # over the forehead and the lids' upper skin, not round the eyes to the cheeks.
        eye_y = float(model.canonical[model.regions["left_eye"], 1].mean())
        fixed |= set(np.flatnonzero(model.canonical[:478, 1] > eye_y).tolist())
        self.fill = HarmonicFill(model, anchors, fixed)
        # Each brow's rows among the fill's anchors.
        self.rows = [np.isin(self.fill.anchors, ids) for ids in self.brows]
        eyes = model.canonical[[33, 263]]
        self.iod = float(np.linalg.norm(eyes[1, :2] - eyes[0, :2]))

    def apply(
        self, landmarks: NDArray[np.floating], pose: Pose, lifts: tuple[float, float]
    ) -> NDArray[np.float32]:
        """(478, 3) ``landmarks`` (pixels) with the brows lifted."""
        if not any(lifts):
            return np.asarray(landmarks, np.float32)
        at = np.zeros((len(self.fill.anchors), 3), np.float64)
        for rows, lift in zip(self.rows, lifts, strict=True):
            # Canonical y grows down the face.
            at[rows, 1] = -lift * self.iod
        moved = to_pose_space(landmarks, pose) + self.fill.spread(at)
        return np.asarray(from_pose_space(moved, pose), np.float32)
