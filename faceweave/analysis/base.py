"""Backend protocols and the name -> constructor registry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from faceweave.core.geometry import bbox_iou
from faceweave.errors import UsageError
from faceweave.types import BBox, Frame


@dataclass(frozen=True)
class Detection:
    """A detected face box with its confidence and optional keypoints (pixels).

    The keypoints start with the image-left then the image-right eye of an upright
    face (the subject's right, then left eye), as BlazeFace and YuNet both give them.
    ``searched``: found by a wider search than the frame's upright pass (in a tile,
    or the frame turned), where objects pass for faces more often: a weak one needs a
    surer mesh (see the analyser's SURE_FACE_SCORE).
    """

    bbox: BBox
    score: float
    keypoints: NDArray[np.float32] | None = None
    searched: bool = False

    def scaled(self, fx: float, fy: float) -> Detection:
        """The detection in an image ``fx`` by ``fy`` times this one's size (a detector's
        shrunk copy's boxes back in the frame's pixels); itself at 1, 1."""
        if fx == 1.0 and fy == 1.0:
            return self
        x0, y0, x1, y1 = self.bbox
        kps = None if self.keypoints is None else self.keypoints * np.array([fx, fy], np.float32)
        return Detection((x0 * fx, y0 * fy, x1 * fx, y1 * fy), self.score, kps, self.searched)

    def shifted(self, dx: float, dy: float) -> Detection:
        """The detection moved by (``dx``, ``dy``) pixels (a crop's boxes back in the
        frame's), marked as ``searched``."""
        x0, y0, x1, y1 = self.bbox
        kps = None if self.keypoints is None else self.keypoints + np.array([dx, dy], np.float32)
        return Detection((x0 + dx, y0 + dy, x1 + dx, y1 + dy), self.score, kps, True)

    def found_searching(self) -> Detection:
        """This detection marked as ``searched``."""
        return Detection(self.bbox, self.score, self.keypoints, True)

    @property
    def roll(self) -> float:
        """The face's in-plane angle in degrees, clockwise: its eye line's direction
        (0 upright, 90 lying with its top to the right, 180 upside down); 0 without
        keypoints."""
        if self.keypoints is None or len(self.keypoints) < 2:
            return 0.0
        (ax, ay), (bx, by) = np.asarray(self.keypoints, np.float64)[:2, :2]
        return float(np.degrees(np.arctan2(by - ay, bx - ax)))


def mesh_bbox(points: NDArray[np.floating]) -> BBox:
    """The (x0, y0, x1, y1) box of a mesh's points."""
    p = np.asarray(points)[:, :2]
    return (float(p[:, 0].min()), float(p[:, 1].min()), float(p[:, 0].max()), float(p[:, 1].max()))


def quarter_turns(roll: float) -> int:
    """The quarter turns (0-3, clockwise) nearest to an in-plane angle in degrees."""
    return round(roll / 90.0) % 4


class FaceDetector(Protocol):
    """Finds face boxes in a frame."""

    def detect(self, frame: Frame) -> list[Detection]: ...


class LandmarkModel(Protocol):
    """Fits the 478-point mesh to one face given its box; None when it finds no face.

    ``roll`` is the face's in-plane angle in degrees (its eye line, clockwise), so a
    tilted or upside-down face can be fitted upright. ``mirror``: a face cut by the
    frame's side may be fitted with the frame mirrored out past it. ``strict``: only
    a fit the model is surer of is a face (a weak detection of a wider search).
    """

    def fit(
        self,
        frame: Frame,
        bbox: BBox,
        roll: float = 0.0,
        *,
        mirror: bool = True,
        strict: bool = False,
    ) -> NDArray[np.float32] | None: ...


class IdentityModel(Protocol):
    """Computes a 128-D identity descriptor."""

    def embed(
        self, frame: Frame, bbox: BBox, points: NDArray[np.floating] | None = None
    ) -> NDArray[np.float32]: ...


def nms(dets: list[Detection], iou_threshold: float) -> list[Detection]:
    """The best-scoring detections, none overlapping a better one by IoU >= threshold.
    One that a plain pass found too (a dropped detection overlapping it is not
    ``searched``) is no longer ``searched``."""
    dets = sorted(dets, key=lambda d: -d.score)
    kept: list[Detection] = []
    for d in dets:
        over = [i for i, k in enumerate(kept) if bbox_iou(d.bbox, k.bbox) >= iou_threshold]
        if not over:
            kept.append(d)
        elif not d.searched:
            for i in over:
                if kept[i].searched:
                    k = kept[i]
                    kept[i] = Detection(k.bbox, k.score, k.keypoints)
    return kept


DETECTORS: dict[str, Callable[..., FaceDetector]] = {}


def register_detector(
    name: str,
) -> Callable[[Callable[..., FaceDetector]], Callable[..., FaceDetector]]:
    def wrap(ctor: Callable[..., FaceDetector]) -> Callable[..., FaceDetector]:
        DETECTORS[name] = ctor
        return ctor

    return wrap


def detector_names() -> tuple[str, ...]:
    """The registered detector backends, sorted (importing the backends registers them)."""
    from faceweave.analysis import mediapipe_backend as _mp  # noqa: F401
    from faceweave.analysis import onnx_backend as _onnx  # noqa: F401

    return tuple(sorted(DETECTORS))


def create_detector(name: str, **options: object) -> FaceDetector:
    """Build a detector by registry name (``mediapipe``, ``yunet``...)."""
    detector_names()  # registers the backends
    try:
        ctor = DETECTORS[name]
    except KeyError:
        raise UsageError(
            f"unknown detector {name!r}; choose from {', '.join(sorted(DETECTORS))}"
        ) from None
    return ctor(**options)
