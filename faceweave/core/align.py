"""Five-point face alignment: the similarity that takes a face's five points (eyes, nose
tip, mouth corners) to a model's template, and the aligned crop it gives.

The neural models a user brings (:mod:`faceweave.processors.neural`), the face
occluder (:mod:`faceweave.analysis.occluder`) and the face parser
(:mod:`faceweave.analysis.parser`) were trained on faces aligned so.
"""

from __future__ import annotations

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.core.geometry import umeyama
from faceweave.types import Frame

__all__ = ["ARCFACE_TEMPLATE", "FFHQ_TEMPLATE", "aligned_crop", "alignment", "ffhq_alignment"]

# ArcFace's five-point template at 112 px (eyes, nose tip, mouth corners, image-left
# first): the alignment the recogniser, and inswapper after it, were trained on.
ARCFACE_TEMPLATE = np.array(
    [
        [38.2946, 51.6963],
        [73.5318, 51.5014],
        [56.0252, 71.7366],
        [41.5493, 92.3655],
        [70.7299, 92.2041],
    ],
    np.float64,
)

# FFHQ's five-point template (as fractions of the crop's side): the alignment face
# restoration models (GFPGAN, GPEN, CodeFormer) were trained on, and close to the
# CelebAMask-HQ photos face parsers (BiSeNet) were: the whole head, hair included.
FFHQ_TEMPLATE = np.array(
    [
        [0.37691676, 0.46864664],
        [0.62285697, 0.46912813],
        [0.50123859, 0.61331904],
        [0.39308822, 0.72541100],
        [0.61150205, 0.72490465],
    ],
    np.float64,
)


def ffhq_alignment(points5: NDArray[np.floating], size: int) -> NDArray[np.float64]:
    """(2, 3) similarity that takes a face's five points (frame pixels) to FFHQ's
    template at ``size`` px."""
    rotation, scale, translation = umeyama(
        np.asarray(points5, np.float64)[:, :2], FFHQ_TEMPLATE * size
    )
    return np.hstack([scale * rotation, translation[:, None]])


def alignment(points5: NDArray[np.floating], size: int) -> NDArray[np.float64]:
    """(2, 3) similarity that takes a face's five points (``Face.landmarks_5``, frame
    pixels) to ArcFace's template at ``size`` px: scaled by
    size/112 for multiples of 112, else by size/128 and moved 8*size/128 px right
    (the 128-px crops inswapper was trained on)."""
    if size % 112 == 0:
        template = ARCFACE_TEMPLATE * (size / 112)
    else:
        template = ARCFACE_TEMPLATE * (size / 128) + np.array([8 * size / 128, 0.0])
    rotation, scale, translation = umeyama(np.asarray(points5, np.float64)[:, :2], template)
    return np.hstack([scale * rotation, translation[:, None]])


def aligned_crop(frame: Frame, matrix: NDArray[np.float64], size: int) -> Frame:
    """The aligned crop; beyond the frame's edges the frame is continued (no black
    border for the model to take for part of the face, or for the paste-back and the
    blend to bring in)."""
    crop = cv2.warpAffine(
        frame, matrix, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )
    return np.asarray(crop, np.uint8)
