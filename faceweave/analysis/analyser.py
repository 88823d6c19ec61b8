"""FaceAnalyser: detection -> mesh -> pose -> Face, for every face in a frame."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.base import Detection, FaceDetector, create_detector
from faceweave.analysis.mediapipe_backend import MeshLandmarker
from faceweave.core.facemodel import load_face_model
from faceweave.core.geometry import bbox_iou, estimate_pose
from faceweave.errors import InputError, UsageError
from faceweave.types import BBox, Face, Frame

# Mesh vertices of the 5-point layout: image-left eye, image-right eye, nose tip,
# image-left mouth corner, image-right mouth corner.
_IRIS_CENTRES = (468, 473)
_NOSE_TIP = 1
_MOUTH_CORNERS = (61, 291)


ANALYSER_MODES = ("image", "video")


def landmarks_5_from_mesh(points: NDArray[np.floating]) -> NDArray[np.float32]:
    """(5, 2) eyes, nose tip, mouth corners from a (478, >=2) mesh, image-left first."""
    p = np.asarray(points, np.float32)[:, :2]
    eyes = sorted((p[i] for i in _IRIS_CENTRES), key=lambda q: float(q[0]))
    mouth = sorted((p[i] for i in _MOUTH_CORNERS), key=lambda q: float(q[0]))
    return np.stack([eyes[0], eyes[1], p[_NOSE_TIP], mouth[0], mouth[1]]).astype(np.float32)


def mesh_bbox(points: NDArray[np.floating]) -> BBox:
    p = np.asarray(points)[:, :2]
    return (float(p[:, 0].min()), float(p[:, 1].min()), float(p[:, 0].max()), float(p[:, 1].max()))


def check_frame(frame: object) -> Frame:
    """The one place frames are validated: uint8 (H, W, 3) BGR."""
    if not isinstance(frame, np.ndarray):
        raise InputError(f"expected a numpy image, got {type(frame).__name__}")
    if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        raise InputError(f"expected a uint8 (H, W, 3) BGR image, got {frame.dtype} {frame.shape}")
    if frame.shape[0] < 8 or frame.shape[1] < 8:
        raise InputError(f"image too small: {frame.shape[1]}x{frame.shape[0]}")
    return frame


class FaceAnalyser:
    """Finds every face in a frame and describes it.

    Args:
        max_faces: at most this many faces, largest first.
        min_score: detection confidence threshold.
        detector: registry name of the detector backend: ``mediapipe`` (embedded) or
            ``yunet`` (an ONNX model the user supplies, see ``detector_model``).
        detector_model: the model file of an ONNX detector backend.
        execution_provider: onnxruntime provider of ONNX backends (``cpu``, ``cuda``...).
        with_embedding: attach dlib's identity descriptor (computed lazily on first use).
        detect_tiles: detect on an n x n grid of overlapping tiles too (n > 1): finds
            the small faces of group photos, at n*n times the detection cost. For
            still images; live video keeps 1.
        mode: ``image`` (every call stands alone: both BlazeFace models and the
            static mesh, the same image always gives the same faces) or ``video``
            (frames in sequence: the full-range detector with the short-range one
            every third call or when nothing is found, and the mesh in MediaPipe's
            tracking mode; faster, results depend on the previous frames).

    Example:
        >>> analyser = FaceAnalyser()
        >>> faces = analyser.get_faces(frame)  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        max_faces: int = 8,
        min_score: float = 0.5,
        detector: str = "mediapipe",
        detector_model: str | Path | None = None,
        execution_provider: str = "cpu",
        with_embedding: bool = True,
        detect_tiles: int = 1,
        mode: str = "image",
    ) -> None:
        if mode not in ANALYSER_MODES:
            raise UsageError(
                f"unknown analyser mode {mode!r}; choose from {', '.join(ANALYSER_MODES)}"
            )
        self.mode = mode
        self.max_faces = max_faces
        self.min_score = min_score
        self.detector_name = detector
        self.detector_model = detector_model
        self.execution_provider = execution_provider
        self.with_embedding = with_embedding
        self.detect_tiles = detect_tiles
        self.model = load_face_model()

    @cached_property
    def detector(self) -> FaceDetector:
        options: dict[str, object] = {"min_score": self.min_score}
        if self.detect_tiles > 1:
            options["tiles"] = self.detect_tiles
        if self.detector_name == "mediapipe":
            options["adaptive"] = self.mode == "video"
        else:
            options["model_path"] = self.detector_model
            options["execution_provider"] = self.execution_provider
        return create_detector(self.detector_name, **options)

    @cached_property
    def landmarker(self) -> MeshLandmarker:
        return MeshLandmarker(min_score=self.min_score, tracking=self.mode == "video")

    @cached_property
    def identity(self):  # type: ignore[no-untyped-def]
        from faceweave.analysis.dlib_backend import DlibIdentity

        return DlibIdentity()

    def reset(self) -> None:
        """Forget earlier frames (video mode): the next frame starts a new sequence.

        Results of the ``video`` mode depend on the frames before; call this between
        two videos so one clip's last frames do not steer the next clip's first ones.
        """
        for name in ("detector", "landmarker"):
            model = self.__dict__.get(name)  # only models already built
            reset = getattr(model, "reset", None)
            if callable(reset):
                reset()

    def detect(self, frame: Frame) -> list[Detection]:
        dets = self.detector.detect(check_frame(frame))
        dets.sort(key=lambda d: -(d.bbox[2] - d.bbox[0]) * (d.bbox[3] - d.bbox[1]))
        return dets[: self.max_faces]

    def get_faces(self, frame: Frame) -> list[Face]:
        """All faces in the frame, largest first."""
        frame = check_frame(frame)
        faces: list[Face] = []
        for det in self.detect(frame):
            face = self.face_from_box(frame, det.bbox, det.score)
            if face is not None and all(bbox_iou(face.bbox, f.bbox) < 0.5 for f in faces):
                faces.append(face)
        return faces

    def face_from_box(self, frame: Frame, bbox: BBox, score: float = 1.0) -> Face | None:
        points = self.landmarker.fit(frame, bbox)
        if points is None:
            return None
        return self.face_from_landmarks(frame, points, score)

    def face_from_landmarks(
        self, frame: Frame, points: NDArray[np.floating], score: float = 1.0
    ) -> Face:
        """Build a Face from a (478, 3) mesh in frame pixels."""
        pts = np.asarray(points, np.float32)
        pose = estimate_pose(pts, self.model.canonical, weights=self.model.rigid_weights)
        box = mesh_bbox(pts)
        embed_fn = None
        if self.with_embedding:
            x0, y0, x1, y1 = box
            dlib_box = (x0, y0 + 0.22 * (y1 - y0), x1, y1)  # dlib boxes start at the brows
            from faceweave.analysis.dlib_backend import MESH_TO_DLIB5

            dlib5 = pts[list(MESH_TO_DLIB5), :2].copy()

            def embed_fn() -> NDArray[np.float32]:
                return self.identity.embed(frame, dlib_box, dlib5)

        return Face(
            bbox=box,
            score=float(score),
            landmarks_478=pts,
            landmarks_5=landmarks_5_from_mesh(pts),
            pose=pose,
            frame_shape=(int(frame.shape[0]), int(frame.shape[1])),
            frame=frame,
            _embedding_fn=embed_fn,
        )
