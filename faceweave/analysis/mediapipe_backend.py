"""MediaPipe backends: BlazeFace detection (short + full range) and the 478-point mesh.

Only :meth:`_forward` style calls touch MediaPipe; preparation (cropping,
colour order) and post-processing (back to frame pixels) are plain numpy.
"""

from __future__ import annotations

import os
import threading

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.base import Detection, register_detector
from faceweave.core.geometry import bbox_iou
from faceweave.errors import BackendError
from faceweave.types import BBox, Frame

os.environ.setdefault("GLOG_minloglevel", "2")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _import_mediapipe():  # type: ignore[no-untyped-def]
    try:
        import mediapipe as mp
    except ImportError as exc:  # pragma: no cover - install problem
        raise BackendError(f"mediapipe is not installed: {exc}") from exc
    return mp


def _scaled(det: Detection, factor: float) -> Detection:
    if factor == 1.0:
        return det
    x0, y0, x1, y1 = det.bbox
    kps = None if det.keypoints is None else det.keypoints * np.float32(factor)
    return Detection((x0 * factor, y0 * factor, x1 * factor, y1 * factor), det.score, kps)


def _nms(dets: list[Detection], iou_threshold: float) -> list[Detection]:
    dets = sorted(dets, key=lambda d: -d.score)
    kept: list[Detection] = []
    for d in dets:
        if all(bbox_iou(d.bbox, k.bbox) < iou_threshold for k in kept):
            kept.append(d)
    return kept


@register_detector("mediapipe")
class BlazeFaceDetector:
    """BlazeFace short range (faces within ~2 m) and full range (small, far faces), merged by NMS.

    Args:
        min_score: detection confidence threshold.
        ranges: which models to run: ``("short", "full")`` by default.
        tiles: also detect on an n x n grid of overlapping tiles (n > 1) for small
            faces in group photos; costs n*n more detector runs.
    """

    def __init__(
        self,
        *,
        min_score: float = 0.5,
        ranges: tuple[str, ...] = ("short", "full"),
        tiles: int = 1,
    ) -> None:
        mp = _import_mediapipe()
        self.tiles = tiles
        self._models = []
        for name in ranges:
            selection = {"short": 0, "full": 1}[name]
            self._models.append(
                mp.solutions.face_detection.FaceDetection(
                    model_selection=selection, min_detection_confidence=min_score
                )
            )
        self._lock = threading.Lock()

    def detect(self, frame: Frame) -> list[Detection]:
        h, w = frame.shape[:2]
        # BlazeFace looks at 128-192 px: hand it a 640 px copy, not a full 1080p frame
        # (MediaPipe's own copy and resize of a large frame cost more than the model).
        scale = min(1.0, 640.0 / max(h, w))
        small = (
            frame
            if scale == 1.0
            else cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
        )
        found = [
            _scaled(d, 1.0 / scale)
            for d in self._detect_rgb(cv2.cvtColor(small, cv2.COLOR_BGR2RGB), (0, 0))
        ]
        rgb = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB) if self.tiles > 1 else small
        if self.tiles > 1 and max(rgb.shape[:2]) >= 480:
            # Group photos: BlazeFace sees the frame at 128-192 px, where distant faces
            # are a few pixels wide. Overlapping tiles give each face more pixels.
            h, w = rgb.shape[:2]
            n = self.tiles
            th, tw = int(h / n * 1.35), int(w / n * 1.35)
            for ty in np.linspace(0, h - th, n).astype(int):
                for tx in np.linspace(0, w - tw, n).astype(int):
                    tile = np.ascontiguousarray(rgb[ty : ty + th, tx : tx + tw])
                    found.extend(self._detect_rgb(tile, (int(tx), int(ty))))
        return _nms(found, 0.4)

    def _detect_rgb(self, rgb: NDArray[np.uint8], offset: tuple[int, int]) -> list[Detection]:
        h, w = rgb.shape[:2]
        ox, oy = offset
        with self._lock:
            results = [model.process(rgb) for model in self._models]
        found: list[Detection] = []
        for res in results:
            for det in res.detections or []:
                box = det.location_data.relative_bounding_box
                x0, y0 = box.xmin * w + ox, box.ymin * h + oy
                bbox = (x0, y0, x0 + box.width * w, y0 + box.height * h)
                kps = np.array(
                    [[k.x * w + ox, k.y * h + oy] for k in det.location_data.relative_keypoints],
                    np.float32,
                )
                found.append(Detection(bbox, float(det.score[0]), kps))
        return found

    def close(self) -> None:
        for model in self._models:
            model.close()


class MeshLandmarker:
    """The 478-point face mesh (with irises), fitted per face on a square crop around its box.

    Fitting per crop gives a mesh for every detected face, small ones included
    (MediaPipe's own face finder inside FaceMesh only sees large faces).

    Args:
        crop_scale: crop side as a multiple of the box's larger side.
        crop_size: the crop is resized to at most this many pixels.
    """

    def __init__(
        self, *, crop_scale: float = 2.2, crop_size: int = 256, min_score: float = 0.5
    ) -> None:
        mp = _import_mediapipe()
        self._mesh = mp.solutions.face_mesh.FaceMesh(
            static_image_mode=True,
            max_num_faces=1,
            refine_landmarks=True,
            min_detection_confidence=min_score,
        )
        self.crop_scale = crop_scale
        self.crop_size = crop_size
        self._lock = threading.Lock()

    def fit(self, frame: Frame, bbox: BBox) -> NDArray[np.float32] | None:
        crop, matrix = self._prepare(frame, bbox)
        with self._lock:
            res = self._mesh.process(crop)
        if not res.multi_face_landmarks:
            return None
        return self._postprocess(res.multi_face_landmarks[0].landmark, matrix, crop.shape[1])

    def _prepare(self, frame: Frame, bbox: BBox) -> tuple[NDArray[np.uint8], NDArray[np.float64]]:
        x0, y0, x1, y1 = bbox
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2 - 0.05 * (y1 - y0)
        side = self.crop_scale * max(x1 - x0, y1 - y0)
        out = int(min(self.crop_size, max(64, round(side))))
        s = out / side
        matrix = np.array([[s, 0, out / 2 - s * cx], [0, s, out / 2 - s * cy]], np.float64)
        crop = cv2.warpAffine(
            frame,
            matrix,
            (out, out),
            flags=cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
        )
        return cv2.cvtColor(crop, cv2.COLOR_BGR2RGB), matrix

    @staticmethod
    def _postprocess(landmarks, matrix: NDArray[np.float64], size: int) -> NDArray[np.float32]:  # type: ignore[no-untyped-def]
        pts = np.array([[p.x, p.y, p.z] for p in landmarks], np.float64) * size
        s = matrix[0, 0]
        xy = (pts[:, :2] - matrix[:, 2]) / s
        z = pts[:, 2] / s
        return np.concatenate([xy, z[:, None]], axis=1).astype(np.float32)

    def close(self) -> None:
        self._mesh.close()
