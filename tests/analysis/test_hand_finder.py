"""Tests for faceweave.analysis.hands: the crops looked at, duplicates, MediaPipe's hands."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest

from faceweave.analysis.analyser import FaceAnalyser
from faceweave.analysis.hands import Hand, MediaPipeHands, distinct_hands, face_crop
from faceweave.types import Face


@pytest.fixture(scope="module")
def finder() -> Iterator[MediaPipeHands]:
    hands = MediaPipeHands()
    yield hands
    hands.close()


def _hand(shift: float, score: float) -> Hand:
    points = np.stack([np.linspace(0, 40, 21), np.linspace(0, -60, 21)], axis=1) + shift
    return Hand(points.astype(np.float32), score, "right")


def test_face_crop_is_the_square_round_the_face_clipped_to_the_frame() -> None:
    assert face_crop((100, 100, 140, 150), (480, 640), reach=1.5) == (45, 50, 195, 200)
    # At the frame's corner the square is cut by its edges.
    assert face_crop((0, 0, 40, 40), (480, 640), reach=1.5) == (0, 0, 80, 80)
    x0, y0, x1, y1 = face_crop((700, 500, 740, 540), (480, 640))
    assert x1 <= x0 or y1 <= y0  # a box off the frame gives an empty crop


def test_distinct_hands_keeps_one_of_a_hand_found_twice() -> None:
    sure, unsure, other = _hand(0.0, 0.9), _hand(2.0, 0.7), _hand(200.0, 0.8)
    kept = distinct_hands([unsure, other, sure])
    assert kept == [sure, other]
    assert _hand(0.0, 0.5).palm == pytest.approx(np.hypot(18.0, 27.0), rel=1e-5)


def test_no_hand_round_the_package_faces(
    finder: MediaPipeHands,
    astronaut: np.ndarray,
    astronaut_face: Face,
    grace_hopper: np.ndarray,
    grace_hopper_face: Face,
) -> None:
    """Neither package portrait shows a hand near the face (Grace Hopper's tie knot,
    which the palm detector takes for one, is below HAND_PRESENCE)."""
    assert finder.find(astronaut, [astronaut_face.bbox]) == []
    assert finder.find(grace_hopper, [grace_hopper_face.bbox]) == []
    assert finder.find(astronaut, []) == []


def test_a_fist_under_the_chin_is_found(finder: MediaPipeHands, shared_faces: Path) -> None:
    """Chandler's fist under his chin in the Friends photo: missed on the whole frame by
    the palm detector, found on the crop round his face, in the frame's pixels."""
    frame = cv2.imread(str(shared_faces / "img_p05_friends_multiface.jpg"))
    faces = FaceAnalyser().get_faces(frame)
    chandler = min(faces, key=lambda face: np.hypot(face.bbox[0] - 418, face.bbox[1] - 145))
    x0, y0, x1, y1 = chandler.bbox
    hands = finder.find(frame, [chandler.bbox])
    assert len(hands) == 1
    (hand,) = hands
    assert hand.landmarks.shape == (21, 2) and hand.landmarks.dtype == np.float32
    # The wrist below the chin, the knuckles at the jaw's right, in his face's box.
    wrist, knuckles = hand.landmarks[0], hand.landmarks[[5, 9, 13, 17]].mean(0)
    assert wrist[1] > y1 - 0.2 * (y1 - y0)
    assert x0 + 0.5 * (x1 - x0) < knuckles[0] < x1 + 0.3 * (x1 - x0)
    assert y0 + 0.5 * (y1 - y0) < knuckles[1] < y1
    assert 0.3 * (x1 - x0) < hand.palm < 1.0 * (x1 - x0)
    # Looked for round two faces whose crops both show it: still one hand.
    ross = min(faces, key=lambda face: np.hypot(face.bbox[0] - 552, face.bbox[1] - 58))
    assert len(finder.find(frame, [chandler.bbox, ross.bbox])) == 1


def test_the_video_finder_looks_at_the_whole_frame(shared_faces: Path) -> None:
    """In tracking mode the whole frame is looked at (``track``; ``find`` the same once
    a face is given, nothing without one): the hand round the microphone at Lin-Manuel
    Miranda's mouth in the Hamilton clip, tracked over frames 96-100."""
    from faceweave.io.video import VideoReader

    tracker = MediaPipeHands(tracking=True)
    try:
        frames = [f.image for f in VideoReader(shared_faces / "vid_p01_hamilton_clip.mp4")]
        for frame in frames[96:100]:
            tracker.track(frame)
        hands = tracker.track(frames[100])
        assert len(hands) >= 1
        x0, y0 = hands[0].landmarks.min(axis=0)
        x1, y1 = hands[0].landmarks.max(axis=0)
        assert 0 <= x0 < x1 <= frames[100].shape[1] and 0 <= y0 < y1 <= frames[100].shape[0]
        assert tracker.find(frames[100], []) == []
        assert len(tracker.find(frames[100], [(0.0, 0.0, 10.0, 10.0)])) >= 1
    finally:
        tracker.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        # MediaPipe itself aborts the whole process on a complexity it has no model for.
        ({"complexity": 2}, "complexity must be 0 (lite) or 1 (full), got 2"),
        ({"complexity": True}, "complexity must be 0 (lite) or 1 (full), got True"),
        ({"max_hands": 0}, "max_hands must be a whole number from 1 to 64, got 0"),
        ({"max_hands": 1.5}, "max_hands must be a whole number from 1 to 64, got 1.5"),
        ({"max_hands": 10**9}, "max_hands must be a whole number from 1 to 64"),
        ({"min_score": 5}, "min_score must be a number between 0 and 1, got 5"),
        ({"min_presence": float("nan")}, "min_presence must be a number between 0 and 1"),
        ({"reach": -1}, "reach must be a number over 0 and up to 10, got -1"),
        ({"crop_size": 0}, "crop_size must be a whole number from 64 to 4096, got 0"),
        ({"tracking": "yes"}, "tracking must be True or False, got 'yes'"),
    ],
)
def test_the_hand_finder_checks_its_settings(options: dict[str, object], message: str) -> None:
    from faceweave.errors import UsageError

    with pytest.raises(UsageError) as caught:
        MediaPipeHands(**options)  # type: ignore[arg-type]
    assert str(caught.value).startswith(message)


def test_the_hand_finder_checks_its_frames(finder: MediaPipeHands) -> None:
    from faceweave.errors import InputError

    grey = np.zeros((64, 64), np.uint8)
    with pytest.raises(InputError, match=r"expected a uint8 \(H, W, 3\) BGR image"):
        finder.find(grey, [(0, 0, 32, 32)])
    with pytest.raises(InputError, match=r"expected a uint8 \(H, W, 3\) BGR image"):
        finder.track(grey)
