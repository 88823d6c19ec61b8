"""FaceAnalyser: detection -> mesh -> pose -> Face, for every face in a frame."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.base import (
    Detection,
    FaceDetector,
    create_detector,
    detector_names,
    mesh_bbox,
    nms,
    quarter_turns,
)
from faceweave.analysis.mediapipe_backend import COARSE_TILE_MOST_PX, MeshLandmarker, cut_by_side
from faceweave.core.facemodel import load_face_model
from faceweave.core.geometry import bbox_iou, estimate_pose
from faceweave.core.resize import shrink_to_side
from faceweave.errors import UsageError
from faceweave.types import BBox, Face, Frame, check_frame, is_real_number, is_whole_number

# Mesh vertices of the 5-point layout, in the face's own order: its right iris, left
# iris, nose tip, right and left mouth corners (image-left first on an upright face,
# the order of ArcFace's template and of detectors' keypoints).
_FIVE_POINTS = [468, 473, 1, 61, 291]
_NOSE_TIP = 1


ANALYSER_MODES = ("image", "video")

# Quarter turns the detector can be run at (FaceFusion's face detector angles): the
# angle a face is turned clockwise in the image, e.g. 90 for a face lying with its
# top to the right (a phone photo without its orientation tag).
DETECTOR_ANGLES = (0, 90, 180, 270)

# BlazeFace's score above which an upright detection is taken as it is. Upright faces
# in the development photos score 0.81-0.98 (small or far ones down to 0.58); upside
# down, the same faces score at most 0.83, so below this a still image is looked at in
# all four turns. (Lying on their side they score up to 0.93, but their eye keypoints
# still give the tilt the mesh crop is turned by.)
SURE_UPRIGHT_SCORE = 0.85
# A face found only by a wider search (in a tile, or the frame turned:
# Detection.searched) with a score under this needs a mesh the model is sure of
# (MeshLandmarker.fit's ``strict``), in a still and in a video's detections (not in
# its tracker's fits of the faces it follows). Those searches took a spoon in the coffee photo
# (score 0.56-0.69), the dark audience behind a singer seen in profile (0.59-0.71,
# boxes of 300-350 px), a painting and a stadium's banner in turned photos for faces.
# The development photos' faces found so score 0.75 or more, or have meshes the model
# is sure of, but two that go with them: half a face at the edge of the selfie group
# turned upside down (0.52), and a blurred face of 60 px turned 50 degrees in a
# 640 x 360 video frame (in a still's analysis of it; the video's tracks of her, found
# on the whole frame, are as before). Faces found on the frame's sides mirrored out,
# half of each the mirror's, are left out of it: the development photos' weak ones
# are real and their meshes less sure (0.7-0.8).
SURE_FACE_SCORE = 0.75
# Faces whose mesh is under this many pixels across are dropped: BlazeFace and the mesh
# read one into a few pixels of noise (an 8 x 8 random image), and a mirrored fit past
# a tiny image's side did too; the smallest real faces of the development photos are
# about 25 px.
MIN_FACE_PX = 12.0
# A face cut by the frame's top or bottom edge (the eyes and brows of a face whose
# mouth is out of shot) also scores low upright, and half a turn round it reads as
# an upside-down face. Its upright box reaches out of the frame, and so, often, does
# the turned one. A detection that is turned by its keypoints is not taken when its
# box reaches out by more than this share of its size, or when the face's upright box
# does (a whole upside-down photo's faces lie in the frame; ``detector_angles`` asks
# for turns regardless).
TURNED_MAX_OUT = 0.05
# A face found only in a turned frame needs this score: clothing and backgrounds read
# as an upside-down or lying face at 0.51-0.52 (the astronaut's suit in a frame cut
# below her eyes), where the development photos' faces score 0.61-0.98 in every turn.
TURNED_MIN_SCORE = 0.56

# The frame rotation that brings a face turned by the angle upright, and the map from
# the rotated frame's pixels back to the frame's (x, y) -> (x', y'), for width w and
# height h of the original frame.
_UPRIGHT = {
    90: (cv2.ROTATE_90_COUNTERCLOCKWISE, lambda x, y, w, h: (w - y, x)),
    180: (cv2.ROTATE_180, lambda x, y, w, h: (w - x, h - y)),
    270: (cv2.ROTATE_90_CLOCKWISE, lambda x, y, w, h: (y, h - x)),
}


def detect_turned(
    detector: FaceDetector,
    frame: Frame,
    angle: int,
    early: Callable[[list[Detection]], None] | None = None,
) -> list[Detection]:
    """Faces turned clockwise by ``angle`` (a quarter turn), in ``frame``'s pixels:
    the detector runs on the frame turned back, and its boxes and keypoints are
    mapped back. ``early``: at angle 0, handed to a detector that takes it (see
    :meth:`BlazeFaceDetector.detect`); never called otherwise."""
    if angle % 360 == 0:
        if early is not None and getattr(detector, "takes_early", False):
            return detector.detect(frame, early=early)  # type: ignore[call-arg]
        return detector.detect(frame)
    code, back = _UPRIGHT[angle % 360]
    h, w = frame.shape[:2]
    found = []
    for det in detector.detect(cv2.rotate(frame, code)):
        x0, y0, x1, y1 = det.bbox
        xs, ys = back(np.array([x0, x1]), np.array([y0, y1]), w, h)
        box = (float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max()))
        kps = None
        if det.keypoints is not None:
            kx, ky = back(det.keypoints[:, 0], det.keypoints[:, 1], w, h)
            kps = np.stack([kx, ky], axis=1).astype(np.float32)
        found.append(Detection(box, det.score, kps, searched=True))
    return found


# Faces cut by the frame's side (a group selfie's outer faces, a head half out of
# shot): a detector that sees half a face mostly finds none. On a copy with the
# frame's left and right edges mirrored outwards by EDGE_PAD of its longer side, the
# half face and its mirror image read as one whole face. (Not the top and bottom: a
# face mirrored there is an upside-down one.) Small faces take two more runs, on a
# band EDGE_BAND of the frame wide along each side with its mirror image: there they
# have more of the detector's pixels.
EDGE_PAD = 0.15
EDGE_BAND = 0.3
# Such a detection counts when at least this share of its box lies in the frame: the
# mirror images of faces wholly inside the frame lie outside it.
EDGE_MIN_VISIBLE = 0.3


# A frame is looked at for cut faces at most CUT_SIDE px on its long side: each view
# (the padded frame, a band with its mirror image) stays at least as large as the
# copy a detector shrinks it to (640 px), and a phone photo's bands are not stacked
# at full size (100 ms for a 12-megapixel one).
CUT_SIDE = 1280


def detect_cut(detector: FaceDetector, frame: Frame) -> list[Detection]:
    """Faces cut by the frame's left or right edge, in ``frame``'s pixels (their
    boxes reach out of it): the detector runs on the frame with those edges
    mirrored outwards, and on each side's band with its mirror image."""
    full_h, full_w = frame.shape[:2]
    frame = shrink_to_side(frame, CUT_SIDE)
    h, w = frame.shape[:2]
    fx, fy = full_w / w, full_h / h
    pad = round(EDGE_PAD * max(h, w))
    # (image, x of its first column in the frame)
    views = [(cv2.copyMakeBorder(frame, 0, 0, pad, pad, cv2.BORDER_REFLECT_101), -pad)]
    band = round(EDGE_BAND * w)
    if band >= 16:
        left, right = frame[:, :band], frame[:, w - band :]
        views.append((np.ascontiguousarray(np.hstack([left[:, :0:-1], left])), 1 - band))
        views.append((np.ascontiguousarray(np.hstack([right, right[:, -2::-1]])), w - band))
    found = []
    for image, at in views:
        for det in detector.detect(image):
            x0, y0, x1, y1 = det.bbox
            x0, x1 = x0 + at, x1 + at
            if x0 >= 0 and x1 <= w:
                continue  # not cut by a side: the frame's own detection has it
            inside = max(0.0, min(x1, w) - max(x0, 0)) * max(0.0, min(y1, h) - max(y0, 0))
            if inside < EDGE_MIN_VISIBLE * (x1 - x0) * (y1 - y0):
                continue
            kps = None if det.keypoints is None else det.keypoints + np.array([at, 0], np.float32)
            found.append(Detection((x0, y0, x1, y1), det.score, kps).scaled(fx, fy))
    return found


def landmarks_5_from_mesh(points: NDArray[np.floating]) -> NDArray[np.float32]:
    """(5, 2) eyes (iris centres), nose tip, mouth corners from a (478, >=2) mesh, in
    the face's own order: its right eye and mouth corner first, the image-left ones of
    an upright face. (Ordered by image x, they had swapped places on a face turned
    past a quarter turn, and an alignment to a five-point template collapsed.)"""
    return np.asarray(points, np.float32)[_FIVE_POINTS, :2].copy()


def _out_of_frame(box: BBox, w: int, h: int) -> float:
    """How far ``box`` reaches out of a w x h frame: its furthest side's overshoot as a
    share of the box's size on that axis."""
    x0, y0, x1, y1 = box
    bw, bh = max(x1 - x0, 1e-6), max(y1 - y0, 1e-6)
    return max(-x0 / bw, (x1 - w) / bw, -y0 / bh, (y1 - h) / bh, 0.0)


def _inside(point: NDArray[np.floating], box: BBox) -> bool:
    x0, y0, x1, y1 = box
    return bool(x0 <= point[0] <= x1 and y0 <= point[1] <= y1)


def _grown(box: BBox, share: float = 0.25) -> BBox:
    """``box`` grown by ``share`` of its size on every side (a profile's nose tip can
    stand out of a detector's box)."""
    x0, y0, x1, y1 = box
    dx, dy = share * (x1 - x0), share * (y1 - y0)
    return (x0 - dx, y0 - dy, x1 + dx, y1 + dy)


def _centre(box: BBox) -> tuple[float, float]:
    return ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)


def _same_box(a: BBox, b: BBox) -> bool:
    """Two boxes of one face: they overlap by 0.4, or either's centre lies in the other
    (the box of a cut face found whole, and of its part in the frame)."""
    return (
        bbox_iou(a, b) >= 0.4
        or _inside(np.array(_centre(a)), b)
        or _inside(np.array(_centre(b)), a)
    )


# A video's frames are not searched turned as a still's are (a weak face in every
# tenth frame of a crowd scene doubled the Hamilton clip's analysis). A weak upright
# detection is looked at half a turn round instead, on a crop UPSIDE_DOWN_REACH of its
# box wide on each side: an upside-down face reads as a weak upright one (0.6-0.7),
# its mesh then fitted the wrong way up (a garbled swap on every frame), and half a
# turn round it scores better (0.8-0.96; 0.81 tilted to 150 or 210 degrees). At most
# UPSIDE_DOWN_LOOKS a frame; a face is taken the way it was last seen surely for
# UPSIDE_DOWN_RECHECK searches (see FaceAnalyser._upright), a weak reading that
# disagrees looked at leaning that way by UPSIDE_DOWN_HOLD.
UPSIDE_DOWN_REACH = 1.0
UPSIDE_DOWN_LOOKS = 3
UPSIDE_DOWN_RECHECK = 30
UPSIDE_DOWN_HOLD = 0.1


def _upside_down(
    detector: FaceDetector, frame: Frame, det: Detection, turned_before: bool = False
) -> tuple[Detection, bool]:
    """``det``, or the face its crop shows half a turn round (from the way its
    keypoints say it is turned) where that scores better and at least
    TURNED_MIN_SCORE (a still's turned passes' rule: per face the best turn wins; see
    UPSIDE_DOWN_REACH). ``turned_before``: the face was seen surely the other way
    lately, and is taken so again unless ``det`` scores UPSIDE_DOWN_HOLD better (a
    tie had put a tracked upside-down face the wrong way up for ten frames). Also
    whether ``det`` is surely as it reads: half a turn round its crop shows no face."""
    if det.score >= SURE_UPRIGHT_SCORE:
        return det, True
    # Half a turn from the way its keypoints say it is turned.
    turn = (quarter_turns(det.roll) + 2) % 4
    h, w = frame.shape[:2]
    x0, y0, x1, y1 = det.bbox
    dx, dy = UPSIDE_DOWN_REACH * (x1 - x0), UPSIDE_DOWN_REACH * (y1 - y0)
    cx0, cy0 = max(0, int(x0 - dx)), max(0, int(y0 - dy))
    cx1, cy1 = min(w, int(np.ceil(x1 + dx))), min(h, int(np.ceil(y1 + dy)))
    if cx1 - cx0 < 16 or cy1 - cy0 < 16:
        return det, False
    crop = np.ascontiguousarray(frame[cy0:cy1, cx0:cx1])
    best, seen = det, False
    for found in detect_turned(detector, crop, 90 * turn):
        moved = found.shifted(cx0, cy0)
        if quarter_turns(found.roll) != turn or not _same_box(moved.bbox, det.bbox):
            continue
        if found.score >= TURNED_MIN_SCORE:
            seen = True
            hold = UPSIDE_DOWN_HOLD if turned_before and best is det else 0.0
            if found.score + hold > best.score:
                best = moved
    return best, not seen


def _prefitted(det: Detection, prefit: list[tuple[Detection, Face]]) -> Face | None:
    """The face fitted on the detection ``det`` merged (the one it overlaps most, by
    at least NMS's 0.4, turned the same way up by its keypoints), with ``det``'s
    score; None where there is none. (An upside-down face found weakly upright, its
    keypoints the wrong way up, would have its mesh fitted so: the detection of the
    turned frame that wins for it takes a fit of its own.)"""
    overlaps = [
        (bbox_iou(other.bbox, det.bbox), face)
        for other, face in prefit
        if quarter_turns(other.roll) == quarter_turns(det.roll)
    ]
    iou, face = max(overlaps, key=lambda o: o[0], default=(0.0, None))
    if face is None or iou < 0.4:
        return None
    if face.score == det.score:
        return face
    return dataclasses.replace(face, score=float(det.score), _cache={})


def _same_face(a: Face, b: Face) -> bool:
    """Two meshes of one face: their boxes overlap by half, or either's nose tip lies
    in the other's box (a second, shifted fit from a loose detection)."""
    return (
        bbox_iou(a.bbox, b.bbox) >= 0.5
        or _inside(a.landmarks_478[_NOSE_TIP], b.bbox)
        or _inside(b.landmarks_478[_NOSE_TIP], a.bbox)
    )


def mesh_roll(points: NDArray[np.floating]) -> float:
    """A mesh's in-plane angle in degrees, clockwise, as :attr:`Detection.roll`: the
    line from the subject's right eye's outer corner to the left one's."""
    p = np.asarray(points, np.float64)
    (ax, ay), (bx, by) = p[33, :2], p[263, :2]
    return float(np.degrees(np.arctan2(by - ay, bx - ax)))


# detect_tiles' largest grid (8 x 8 tiles: 64 detector runs a frame).
MAX_DETECT_TILES = 8
# What a still photo is searched with where all its faces are wanted (faceweave swap and
# analyse, get_many_faces): 2 x 2 tiles too (a group's small faces), and the frame's
# sides (faces cut by them). Seven more detector runs than the defaults.
STILL_DETECT_TILES = 2
STILL_DETECT_EDGES = True


class _IdentitySlot:
    """An analyser's identity model, loaded on first use. The lazy embeddings of its
    faces hold this, not the analyser: a face kept after its analyser was dropped had
    kept the analyser's detection and mesh graphs (about 75 MiB) alive with it."""

    __slots__ = ("model", "_lock")

    def __init__(self) -> None:
        self.model: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        if self.model is None:
            with self._lock:
                if self.model is None:
                    from faceweave.analysis.dlib_backend import DlibIdentity

                    self.model = DlibIdentity()
        return self.model


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
        detect_tiles: detect on a grid of overlapping tiles too, n along the frame's
            short side (n from 2 to MAX_DETECT_TILES, 8; 1: none; a detector may use
            more on a large or long frame, as BlazeFace's does): finds the small faces
            of group photos, at n*n times the detection cost or more. For still
            images; live video keeps 1.
        detect_edges: also look for faces cut by the frame's sides (see
            :func:`detect_cut`): three more detector runs. For still images; video
            keeps it off.
        detector_angles: run the detector at these quarter turns (0, 90, 180, 270: how
            far a face is turned clockwise) and keep every face found; costs one
            detector run per angle. ``None`` (default): upright only; in ``image``
            mode also the other three turns when no face found upright scores
            :data:`SURE_UPRIGHT_SCORE` or more (sideways and upside-down
            photos), so a photo of clear upright faces costs nothing more.
        tile_most_px: with ``detect_tiles``, BlazeFace's tiles span at most this many
            of the frame's pixels on their short side (more tiles on a larger frame;
            see :func:`~faceweave.analysis.mediapipe_backend.tiles_across`); None: its
            own default, 480 in ``image`` mode, 768 in ``video`` mode.
        sweep_tiles: ``video`` mode with ``detect_tiles`` and the ``mediapipe``
            detector: frames where faces are found have a few of the tiles looked at
            too, in turn (see BlazeFaceDetector's ``sweep``), so small faces beside
            a large one are found within a few detections (by default tiles are only
            looked at while no face is found). For a video whose every face is
            wanted (about 1 ms a frame at 1080p, and a fit per frame for each face
            it adds).
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
        detect_edges: bool = False,
        detector_angles: tuple[int, ...] | None = None,
        tile_most_px: int | None = None,
        sweep_tiles: bool = False,
        mode: str = "image",
    ) -> None:
        if mode not in ANALYSER_MODES:
            raise UsageError(
                f"unknown analyser mode {mode!r}; choose from {', '.join(ANALYSER_MODES)}"
            )
        if not is_whole_number(max_faces) or max_faces < 1:
            raise UsageError(f"max_faces must be a whole number of 1 or more, got {max_faces!r}")
        if not is_real_number(min_score) or not 0.0 <= min_score <= 1.0:  # also refuses NaN
            raise UsageError(f"min_score must be a number between 0 and 1, got {min_score!r}")
        if not is_whole_number(detect_tiles) or not 1 <= detect_tiles <= MAX_DETECT_TILES:
            raise UsageError(
                f"detect_tiles must be a whole number from 1 to {MAX_DETECT_TILES}, "
                f"got {detect_tiles!r}"
            )
        if tile_most_px is not None and (not is_whole_number(tile_most_px) or tile_most_px < 64):
            raise UsageError(
                f"tile_most_px must be a whole number of 64 or more, got {tile_most_px!r}"
            )
        switches = (
            ("with_embedding", with_embedding),
            ("detect_edges", detect_edges),
            ("sweep_tiles", sweep_tiles),
        )
        for name, switch in switches:
            if not isinstance(switch, bool | np.bool_):
                raise UsageError(f"{name} must be True or False, got {switch!r}")
        if detector not in detector_names():
            raise UsageError(
                f"unknown detector {detector!r}; choose from {', '.join(detector_names())}"
            )
        if sweep_tiles and (mode != "video" or detect_tiles <= 1 or detector != "mediapipe"):
            raise UsageError(
                "sweep_tiles needs mode='video', detect_tiles of 2 or more and the "
                "mediapipe detector (it looks at the tiles of a video's frames in turn)"
            )
        if detector_angles is not None:
            if isinstance(detector_angles, str | bytes) or not isinstance(
                detector_angles, Iterable
            ):
                raise UsageError(
                    f"detector_angles must be a list of quarter turns "
                    f"({', '.join(map(str, DETECTOR_ANGLES))}), got {detector_angles!r}"
                )
            # (A set's order is arbitrary: sorted, so the same angles run in one order.)
            unordered = isinstance(detector_angles, set | frozenset)
            detector_angles = tuple(sorted(detector_angles) if unordered else detector_angles)
            bad = [a for a in detector_angles if a not in DETECTOR_ANGLES]
            if bad or not detector_angles:
                raise UsageError(
                    f"detector angles must be some of {', '.join(map(str, DETECTOR_ANGLES))}"
                    f", got {', '.join(map(str, detector_angles)) or 'none'}"
                )
            detector_angles = tuple(dict.fromkeys(detector_angles))
        self.detector_angles = detector_angles
        self.mode = mode
        # (How a video's faces were last seen surely, where and when: see _upright.)
        self._turns_seen: list[tuple[BBox, int, int]] = []
        self._looks = 0
        self.max_faces = max_faces
        self.min_score = min_score
        self.detector_name = detector
        self.detector_model = detector_model
        self.execution_provider = execution_provider
        self.detect_tiles = detect_tiles
        self.tile_most_px = None if tile_most_px is None else int(tile_most_px)
        self.sweep_tiles = bool(sweep_tiles)
        self.detect_edges = bool(detect_edges)
        self.with_embedding = bool(with_embedding)
        self._identity = _IdentitySlot()
        # Calls under way (close() waits for them; calls wait while it closes), and
        # the process they count in (a forked child starts with none).
        self._use = threading.Condition()
        self._busy = 0
        self._closing = False
        self._pid = os.getpid()
        self._calling = threading.local()  # this thread's calls under way (depth)
        self.model = load_face_model()
        if detector != "mediapipe":
            # A model file is loaded now: a missing or broken one fails here, not on
            # the first frame (MediaPipe's graphs, which ship, are built on first use).
            _ = self.detector

    @cached_property
    def detector(self) -> FaceDetector:
        return self._create_detector(
            self.detect_tiles, tile_most_px=self.tile_most_px, sweep=self.sweep_tiles
        )

    @cached_property
    def _edge_detector(self) -> FaceDetector:
        """The detector for :func:`detect_cut`: without tiles, which over the mirrored
        margins would cost as much again as over the frame."""
        return self.detector if self.detect_tiles <= 1 else self._create_detector(1)

    @cached_property
    def _turned_detector(self) -> FaceDetector:
        """The detector of a still's turned passes (see _candidates): BlazeFace's tiles
        as coarse as a video's. A photo with no clear upright face (every faceless one)
        is looked at in three more turns; with the upright pass's finer tiles in each, a
        faceless 1080p photo took 392 ms, against 152 before those tiles."""
        if self.detector_name != "mediapipe" or self.detect_tiles <= 1:
            return self.detector
        return self._create_detector(self.detect_tiles, tile_most_px=COARSE_TILE_MOST_PX)

    def _create_detector(
        self, tiles: int, tile_most_px: int | None = None, *, sweep: bool = False
    ) -> FaceDetector:
        options: dict[str, object] = {"min_score": self.min_score}
        if tiles > 1:
            options["tiles"] = tiles
        if self.detector_name == "mediapipe":
            options["adaptive"] = self.mode == "video"
            if tile_most_px is not None:
                options["tile_most_px"] = tile_most_px
            if sweep:
                options["sweep"] = True
        else:
            options["model_path"] = self.detector_model
            options["execution_provider"] = self.execution_provider
        return create_detector(self.detector_name, **options)

    @cached_property
    def landmarker(self) -> MeshLandmarker:
        return MeshLandmarker(min_score=self.min_score, tracking=self.mode == "video")

    @property
    def identity(self):  # type: ignore[no-untyped-def]
        """The identity model (dlib's descriptor), loaded on first use; analysers may
        share one (assign it)."""
        return self._identity.get()

    @identity.setter
    def identity(self, model: Any) -> None:
        self._identity.model = model

    def reset(self) -> None:
        """Forget earlier frames (video mode): the next frame starts a new sequence.

        Results of the ``video`` mode depend on the frames before; call this between
        two videos so one clip's last frames do not steer the next clip's first ones.
        """
        for name in ("detector", "_edge_detector", "_turned_detector", "landmarker"):
            model = self.__dict__.get(name)  # only models already built
            reset = getattr(model, "reset", None)
            if callable(reset):
                reset()
        self._turns_seen = []

    def _forked(self) -> None:
        """In a forked child, forget the parent's calls under way (their threads are
        not here)."""
        if self._pid != os.getpid():
            self._use = threading.Condition()
            self._busy, self._closing, self._pid = 0, False, os.getpid()
            self._calling = threading.local()

    @contextlib.contextmanager
    def _in_use(self) -> Iterator[None]:
        self._forked()
        depth = getattr(self._calling, "depth", 0)
        with self._use:
            if not depth:  # (a call inside one of this thread's own goes on)
                self._use.wait_for(lambda: not self._closing)
            self._busy += 1
        self._calling.depth = depth + 1
        try:
            yield
        finally:
            self._calling.depth = depth
            with self._use:
                self._busy -= 1
                self._use.notify_all()

    def close(self) -> None:
        """Free the detection and mesh models' graphs now (their threads and memory,
        about 35 MiB a graph), once the calls under way in other threads are done; a
        later call loads them again. Dropping the analyser frees them too. The
        identity model, which analysers may share, is left.

        Raises:
            UsageError: called inside one of the analyser's own calls.
        """
        self._forked()
        if getattr(self._calling, "depth", 0):
            raise UsageError("an analyser cannot be closed inside one of its own calls")
        with self._use:
            self._use.wait_for(lambda: not self._closing)  # one close at a time
            self._closing = True
            self._use.wait_for(lambda: self._busy == 0)
        try:
            closed: set[int] = set()
            for name in ("detector", "_edge_detector", "_turned_detector", "landmarker"):
                model = self.__dict__.pop(name, None)  # only models already built
                close = getattr(model, "close", None)
                if callable(close) and id(model) not in closed:
                    closed.add(id(model))
                    close()
            self._turns_seen = []
        finally:
            with self._use:
                self._closing = False
                self._use.notify_all()

    def __enter__(self) -> FaceAnalyser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def detect(self, frame: Frame) -> list[Detection]:
        """The detected face boxes, largest first, at most ``max_faces``."""
        frame = check_frame(frame)
        with self._in_use():
            return self._detect(frame)

    def _detect(self, frame: Frame) -> list[Detection]:
        dets = self._candidates(frame)
        dets += self._cut_candidates(frame, [d.bbox for d in dets])
        dets.sort(key=lambda d: -(d.bbox[2] - d.bbox[0]) * (d.bbox[3] - d.bbox[1]))
        return dets[: self.max_faces]

    def _candidates(
        self, frame: Frame, *, early: Callable[[list[Detection]], None] | None = None
    ) -> list[Detection]:
        angles = self.detector_angles or (0,)
        dets = [d for angle in angles for d in detect_turned(self.detector, frame, angle, early)]
        if (
            self.detector_angles is None
            and self.mode == "image"
            and max((d.score for d in dets), default=0.0) < SURE_UPRIGHT_SCORE
        ):
            # Maybe a sideways or upside-down face: BlazeFace finds those weakly at 0
            # degrees, with keypoints (and so a mesh) the wrong way up. Look at the
            # other quarter turns too; per face the best-scoring turn wins.
            angles = DETECTOR_ANGLES
            h, w = frame.shape[:2]
            cut = [d.bbox for d in dets if _out_of_frame(d.bbox, w, h) > TURNED_MAX_OUT]
            dets += [
                d
                for angle in angles[1:]
                for d in detect_turned(self._turned_detector, frame, angle)
                if quarter_turns(d.roll) == 0  # its keypoints say upright after all
                or (
                    d.score >= TURNED_MIN_SCORE
                    and _out_of_frame(d.bbox, w, h) <= TURNED_MAX_OUT
                    and not any(_same_box(d.bbox, box) for box in cut)
                )
            ]
        if self.detector_angles is None and self.mode == "video":
            dets = self._upright(frame, dets)
        return nms(dets, 0.4) if len(angles) > 1 else dets

    def _upright(self, frame: Frame, dets: list[Detection]) -> list[Detection]:
        """A video frame's detections, each weak one that is an upside-down face turned
        the right way up (see _upside_down). Where a face was last seen surely (a sure
        detection, or a look half a turn round that found no face there), it is taken
        as it was seen for UPSIDE_DOWN_RECHECK searches: a weak reading that agrees is
        not looked at again (a crowd's weak faces in the Hamilton clip had cost it a
        quarter more), and one that disagrees is looked at leaning the way it was seen
        (an upright face with dark lenses drawn on read 0.84 half a turn round against
        0.69 upright, and was fitted upside down)."""
        self._looks += 1
        now = self._looks
        seen = [
            (box, turn, at) for box, turn, at in self._turns_seen if now - at <= UPSIDE_DOWN_RECHECK
        ]

        def remember(box: BBox, turn: int) -> None:
            seen[:] = [entry for entry in seen if not _same_box(entry[0], box)]
            seen.append((box, turn, now))

        for det in dets:
            if det.score >= SURE_UPRIGHT_SCORE:
                remember(det.bbox, quarter_turns(det.roll))
        weak = sorted(
            (i for i, d in enumerate(dets) if d.score < SURE_UPRIGHT_SCORE),
            key=lambda i: -dets[i].score,
        )
        looked = 0
        for i in weak:
            det = dets[i]
            known = [turn for box, turn, _ in seen if _same_box(det.bbox, box)]
            if known and known[-1] == quarter_turns(det.roll):
                continue  # as it was seen surely
            if looked >= UPSIDE_DOWN_LOOKS:
                break
            looked += 1
            found, upright = _upside_down(self.detector, frame, det, bool(known))
            if upright:
                remember(det.bbox, quarter_turns(det.roll))
            elif found is not det and found.score >= SURE_UPRIGHT_SCORE:
                remember(found.bbox, quarter_turns(found.roll))
            dets[i] = found
        self._turns_seen = seen
        return dets

    def _cut_candidates(self, frame: Frame, found: list[BBox]) -> list[Detection]:
        """With ``detect_edges``, the faces cut by the frame's sides whose boxes are not
        among ``found``, best first."""
        if not self.detect_edges:
            return []
        cut = detect_cut(self._edge_detector, frame)
        cut = nms([d for d in cut if not any(_same_box(d.bbox, box) for box in found)], 0.4)
        return sorted(cut, key=lambda d: -d.score)

    def get_faces(self, frame: Frame) -> list[Face]:
        """All faces in the frame (at most ``max_faces``), largest first."""
        frame = check_frame(frame)
        with self._in_use():
            return self._get_faces(frame)

    def _get_faces(self, frame: Frame) -> list[Face]:
        # A still image's upright faces are fitted while the detection still runs: the
        # detector hands over its first pass's boxes (BlazeFace's short-range model)
        # and goes on with the rest (the full-range model) on the other core. (Faces
        # it saw lying on their side or upside down are left to the detections of
        # the frame turned their way, whose boxes are tighter.)
        prefit: list[tuple[Detection, Face]] = []

        def early(dets: list[Detection]) -> None:
            for det in sorted(dets, key=lambda d: -d.score):
                if quarter_turns(det.roll) != 0:
                    continue
                face = self._face_from_box(frame, det.bbox, det.score, det.roll, mirror=False)
                if face is not None:
                    prefit.append((det, face))

        found = self._candidates(frame, early=early if self.mode == "image" else None)
        found.sort(key=lambda d: -d.score)
        faces = self._fitted(frame, found, [], mirror=False, prefit=prefit)
        # Then faces cut by the frame's sides: the frame's own detections of such faces
        # that gave none, and (``detect_edges``) those found on the frame mirrored out,
        # fitted on a crop mirrored out where the usual one gives none. After every
        # usual fit: another box of the same face may fit it better.
        missed = [
            d
            for d in found
            if cut_by_side(frame, d.bbox, d.roll)
            and not any(_same_box(d.bbox, f.bbox) for f in faces)
        ]
        cut = self._cut_candidates(frame, [f.bbox for f in faces] + [d.bbox for d in missed])
        faces = self._fitted(frame, missed + cut, faces, mirror=True)
        # By the fitted meshes' boxes: detectors' boxes differ in size between turns.
        faces.sort(key=lambda f: -(f.bbox[2] - f.bbox[0]) * (f.bbox[3] - f.bbox[1]))
        return faces[: self.max_faces]

    def _fitted(
        self,
        frame: Frame,
        dets: list[Detection],
        faces: list[Face],
        *,
        mirror: bool,
        prefit: list[tuple[Detection, Face]] | None = None,
    ) -> list[Face]:
        """``faces`` and the faces of ``dets`` (fitted in this order) that are none of
        them. Best detections first: when a loose box's mesh lands on a face that has
        its own box, the face keeps the mesh fitted in its own box. ``prefit``: faces
        already fitted on other detections; a detection that merged such a one
        (:func:`_prefitted`) takes its face rather than a fit of its own."""
        faces = list(faces)
        for det in dets:
            face = _prefitted(det, prefit or [])
            if face is None:
                # A weak detection of a wider search (a tile, a turned frame): only a
                # sure mesh (see SURE_FACE_SCORE).
                strict = det.searched and det.score < SURE_FACE_SCORE
                face = self._face_from_box(
                    frame, det.bbox, det.score, det.roll, mirror=mirror, strict=strict
                )
            if face is None or not _inside(face.landmarks_478[_NOSE_TIP], _grown(det.bbox)):
                continue  # no mesh, or one fitted to a neighbouring face in the crop
            if face.size < MIN_FACE_PX:
                continue  # a few pixels of noise (tiny images) read as a face
            if not any(_same_face(face, f) for f in faces):
                faces.append(face)
        return faces

    def face_from_box(
        self,
        frame: Frame,
        bbox: BBox,
        score: float = 1.0,
        roll: float = 0.0,
        *,
        mirror: bool = True,
        strict: bool = False,
    ) -> Face | None:
        """The face in ``bbox`` (its mesh fitted there), or None; ``roll`` as
        :attr:`Detection.roll`; ``mirror`` and ``strict`` as :meth:`MeshLandmarker.fit`."""
        with self._in_use():
            return self._face_from_box(frame, bbox, score, roll, mirror=mirror, strict=strict)

    def _face_from_box(
        self,
        frame: Frame,
        bbox: BBox,
        score: float = 1.0,
        roll: float = 0.0,
        *,
        mirror: bool = True,
        strict: bool = False,
    ) -> Face | None:
        points = self.landmarker.fit(frame, bbox, roll, mirror=mirror, strict=strict)
        if points is None:
            return None
        fitted = mesh_roll(points)
        if quarter_turns(fitted) != quarter_turns(roll):
            # The detector's keypoints misjudged a strongly tilted face: fit again with
            # the crop turned the way the mesh says, and keep that fit if it agrees.
            again = self.landmarker.fit(frame, bbox, fitted, mirror=mirror, strict=strict)
            if again is not None and quarter_turns(mesh_roll(again)) == quarter_turns(fitted):
                points = again
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
            from faceweave.analysis.dlib_backend import dlib_alignment

            dlib_box, dlib5 = dlib_alignment(pts)
            identity = self._identity  # (not the analyser: a kept face kept its graphs)

            def embed_fn() -> NDArray[np.float32]:
                return identity.get().embed(frame, dlib_box, dlib5)  # type: ignore[no-any-return]

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


def photo_analyser(**options: Any) -> FaceAnalyser:
    """An analyser that finds a photo's faces as ``faceweave swap`` does: a group's
    small faces (tiles) and faces cut by the frame's sides too. ``options``: any other
    :class:`FaceAnalyser` arguments (``max_faces``, a detector...)."""
    return FaceAnalyser(detect_tiles=STILL_DETECT_TILES, detect_edges=STILL_DETECT_EDGES, **options)
