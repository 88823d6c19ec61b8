"""Hands near faces: MediaPipe's hand landmarker, looked for round each face.

A hand held to the face lies in front of it, and a swap that keeps it must know
where it is (:mod:`faceweave.core.hands` draws its area from its landmarks).
MediaPipe 0.10.21 ships its hand models (a palm detector and a 21-point hand
landmarker) inside the package, as it does its face models. Its palm detector
looks at the whole image at 192 px: on a frame with several people a hand at a
chin is a few of those pixels, and it missed Chandler's fist under his chin in
the Friends photo (img_p05 of the development set) that it finds on a crop round
his face. So :class:`MediaPipeHands` looks on a square crop round each face
(:data:`HAND_REACH` box sizes out from its middle), shrunk to at most
:data:`HAND_CROP_SIZE` px, and maps the points back to the frame; a hand that two
faces' crops both show is kept once. A video's frames, in order, are looked at
whole in MediaPipe's tracking mode instead (``tracking``): each hand is looked for
where the last frame showed it, and is lost far less often from frame to frame.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.mediapipe_backend import (
    _import_mediapipe,
    _landmark_array,
    _process,
    graph_closer,
)
from faceweave.core.hands import HAND_POINTS
from faceweave.errors import UsageError
from faceweave.types import BBox, Frame, check_frame, is_real_number, is_whole_number

__all__ = [
    "HAND_CROP_SIZE",
    "HAND_FRAME_SIZE",
    "HAND_PRESENCE",
    "HAND_REACH",
    "Hand",
    "HandFinder",
    "MediaPipeHands",
]

# The crop a face's hands are looked for on: a square this many times the face box's
# larger side out from its middle each way (a fist under the chin, a hand at the ear,
# one round a microphone at the mouth), shrunk to at most HAND_CROP_SIZE px (the palm
# detector sees 192 px; the landmarker crops the hand from what it is given).
HAND_REACH = 1.5
HAND_CROP_SIZE = 384
# A video's frames are looked at whole (see MediaPipeHands' ``tracking``), shrunk to at
# most this many pixels on their long side.
HAND_FRAME_SIZE = 640
# Two hands whose wrists and middle-finger roots lie within this share of the palm's
# length of each other are one (found on two faces' crops).
SAME_HAND = 0.25
# A hand is kept when the landmarker's own hand presence score reaches this (MediaPipe's
# ``min_tracking_confidence``, which thresholds it in the static mode too). At 0.5, of
# the 10 hands found on the development photos (on crops round their faces) one was a
# tie's knot under Grace Hopper's chin; at 0.8 the 6 left are all hands, Chandler's fist
# under his chin (img_p05) among them, and 3 hands away from any face (at a shoulder,
# at a chest, holding a bag) are lost with the knot. A hand found
# where there is none would keep a hand-shaped patch of the target's face; one missed
# leaves the swap as it is without the option.
HAND_PRESENCE = 0.8


@dataclass(frozen=True)
class Hand:
    """A hand found in a frame.

    Attributes:
        landmarks: (21, 2) float32, its points in the frame's pixels (MediaPipe's
            order: the wrist, then each finger's four joints from the thumb).
        score: MediaPipe's confidence in its handedness, 0..1.
        side: ``"left"`` or ``"right"``, as MediaPipe labels it (for a photo of a
            person facing the camera it reads the hand as if mirrored).
    """

    landmarks: NDArray[np.float32]
    score: float
    side: str

    @property
    def palm(self) -> float:
        """The palm's length in pixels: from the wrist to the middle finger's root."""
        return float(np.hypot(*(self.landmarks[9] - self.landmarks[0])))


class HandFinder(Protocol):
    """What finds the hands near faces (a swap's ``mask_hands``)."""

    def find(self, frame: Frame, boxes: Sequence[BBox]) -> list[Hand]:
        """The hands near the faces in ``boxes`` (frame pixels)."""
        ...

    def close(self) -> None: ...


def face_crop(box: BBox, shape: tuple[int, ...], reach: float = HAND_REACH) -> tuple[int, ...]:
    """(x0, y0, x1, y1): the square ``reach`` box sizes out from a face box's middle,
    clipped to a frame of ``shape``; empty (x1 <= x0 or y1 <= y0) when the box lies
    outside it."""
    x0, y0, x1, y1 = (float(v) for v in box)
    half = reach * max(x1 - x0, y1 - y0)
    cx, cy = (x0 + x1) / 2.0, (y0 + y1) / 2.0
    height, width = shape[:2]
    return (
        int(max(0, np.floor(cx - half))),
        int(max(0, np.floor(cy - half))),
        int(min(width, np.ceil(cx + half))),
        int(min(height, np.ceil(cy + half))),
    )


def distinct_hands(hands: Sequence[Hand]) -> list[Hand]:
    """``hands`` with those found twice (see SAME_HAND) kept once, the surer first."""
    kept: list[Hand] = []
    for hand in sorted(hands, key=lambda h: -h.score):
        ends = hand.landmarks[[0, 9]]
        reach = SAME_HAND * max(hand.palm, 1.0)
        if not any(np.all(np.hypot(*(ends - other.landmarks[[0, 9]]).T) < reach) for other in kept):
            kept.append(hand)
    return kept


class MediaPipeHands:
    """MediaPipe's hand landmarker (palm detector plus 21 points), on a crop round each face.

    Args:
        max_hands: the most hands looked for on one face's crop.
        min_score: the palm detector's confidence threshold. A palm it finds that is no
            hand costs the landmarker's run too (about 9 ms more a crop); at 0.7 the
            development photos' faces took 11.4 ms a face against 12.5, and the Hamilton
            clip's tracked frames with a hand over the face fell from 112 to 87.
        min_presence: see :data:`HAND_PRESENCE`.
        complexity: MediaPipe's hand model: 0 (lite) or 1 (full; on this project's
            development machine the cheaper one when no hand shows, its usual case:
            about 9.5 ms a crop against 13, 18 ms where a hand shows).
        reach: see :data:`HAND_REACH`.
        crop_size: see :data:`HAND_CROP_SIZE`.
        tracking: for a video's frames in order: the whole frame (within
            :data:`HAND_FRAME_SIZE`) in MediaPipe's tracking mode, each hand looked for
            where the last frame showed it. Per-frame crops in the static mode lose a
            hand for a frame here and there, and a hand kept in one frame and painted
            over in the next flickers: on the Hamilton clip (vid_p01, 275 frames, a
            hand round a microphone at the mouth) they found a hand over the face in
            87 frames, with 7 gaps of 1-3 frames between frames with a hand; the whole
            frame tracked, in 112, with 1 such gap (``benchmarks/hands.py``, run
            ``hands78``). Small faces' hands (a wide shot) are missed this way.
    """

    def __init__(
        self,
        *,
        max_hands: int = 2,
        min_score: float = 0.5,
        min_presence: float = HAND_PRESENCE,
        complexity: int = 1,
        reach: float = HAND_REACH,
        crop_size: int = HAND_CROP_SIZE,
        tracking: bool = False,
    ) -> None:
        # (MediaPipe aborts the process on a complexity it has no model for, and fails
        # on the first frame with a count of 0 hands.)
        if not is_whole_number(max_hands) or not 1 <= max_hands <= 64:
            raise UsageError(f"max_hands must be a whole number from 1 to 64, got {max_hands!r}")
        if isinstance(complexity, bool) or complexity not in (0, 1):
            raise UsageError(f"complexity must be 0 (lite) or 1 (full), got {complexity!r}")
        for name, value in (("min_score", min_score), ("min_presence", min_presence)):
            if not is_real_number(value) or not 0.0 <= value <= 1.0:  # also refuses NaN
                raise UsageError(f"{name} must be a number between 0 and 1, got {value!r}")
        if not is_real_number(reach) or not 0.0 < reach <= 10.0:
            raise UsageError(f"reach must be a number over 0 and up to 10, got {reach!r}")
        if not is_whole_number(crop_size) or not 64 <= crop_size <= 4096:
            raise UsageError(f"crop_size must be a whole number from 64 to 4096, got {crop_size!r}")
        if not isinstance(tracking, bool | np.bool_):
            raise UsageError(f"tracking must be True or False, got {tracking!r}")
        mp = _import_mediapipe()
        self.reach = reach
        self.crop_size = crop_size
        self.tracking = tracking
        self._graph: Any = mp.solutions.hands.Hands(
            static_image_mode=not tracking,
            max_num_hands=max_hands,
            model_complexity=complexity,
            min_detection_confidence=min_score,
            min_tracking_confidence=min_presence,
        )
        self._lock = threading.Lock()
        self._close_graph = graph_closer(self, [self._graph])

    def find(self, frame: Frame, boxes: Sequence[BBox]) -> list[Hand]:
        """The hands on the crops round the faces in ``boxes`` (see the module), or with
        ``tracking`` on the whole frame (:meth:`track`); none where no box is given."""
        frame = check_frame(frame)
        if not boxes:
            return []
        if self.tracking:
            return self.track(frame)
        crops = [(*face_crop(box, frame.shape, self.reach), self.crop_size) for box in boxes]
        return self._look(frame, crops)

    def track(self, frame: Frame) -> list[Hand]:
        """The hands on the whole frame (within :data:`HAND_FRAME_SIZE`): with
        ``tracking``, a video's next frame, each hand looked for where the last frame
        showed it (a live session looks while its faces are still being found)."""
        frame = check_frame(frame)
        height, width = frame.shape[:2]
        return self._look(frame, [(0, 0, width, height, HAND_FRAME_SIZE)])

    def _look(self, frame: Frame, crops: Sequence[tuple[int, ...]]) -> list[Hand]:
        """The hands on each (x0, y0, x1, y1, most px) crop of ``frame``, in its pixels."""
        found: list[Hand] = []
        for x0, y0, x1, y1, most in crops:
            if x1 - x0 < 16 or y1 - y0 < 16:
                continue
            crop = frame[y0:y1, x0:x1]
            scale = min(1.0, most / max(x1 - x0, y1 - y0))
            if scale < 1.0:
                size = (max(1, round((x1 - x0) * scale)), max(1, round((y1 - y0) * scale)))
                crop = cv2.resize(crop, size, interpolation=cv2.INTER_AREA)
            rgb = cv2.cvtColor(crop, cv2.COLOR_BGR2RGB)
            with self._lock:
                result = _process(self._graph, rgb)
            found.extend(self._postprocess(result, (x0, y0), (x1 - x0, y1 - y0)))
        return distinct_hands(found)

    @staticmethod
    def _postprocess(result: Any, corner: tuple[int, int], size: tuple[int, int]) -> list[Hand]:
        """The result's hands in frame pixels (normalised crop coordinates scaled by the
        crop's ``size`` in the frame, then moved to its ``corner``)."""
        landmarks = getattr(result, "multi_hand_landmarks", None) or []
        handedness = getattr(result, "multi_handedness", None) or []
        hands = []
        for points, label in zip(landmarks, handedness, strict=False):
            xy = _landmark_array(points)[:, :2]
            if xy.shape[0] != HAND_POINTS or not np.all(np.isfinite(xy)):
                continue
            at = xy * np.array(size, np.float64) + np.array(corner, np.float64)
            best = label.classification[0]
            hands.append(Hand(at.astype(np.float32), float(best.score), str(best.label).lower()))
        return hands

    def close(self) -> None:
        """Free the hand graph (done too once the finder is dropped)."""
        with self._lock:
            self._close_graph()
